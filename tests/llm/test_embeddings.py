"""The embeddings client against the fake server's /v1/embeddings on 127.0.0.1: vectors
in input order across batches; failures are one-line EmbeddingErrors."""

from __future__ import annotations

import pytest

from essaybench.llm.embeddings import EmbeddingError, cosine, embed
from essaybench.llm.fake.embeddings import fake_embedding
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.registry import ModelSpec
from tests.helpers import closed_port_url


def spec(base_url: str) -> ModelSpec:
    return ModelSpec.model_validate({"provider": "fake", "base_url": base_url,
                                     "model_id": "emb", "family": "fake",
                                     "name": "emb"})


def test_vectors_come_back_in_order_across_batches() -> None:
    texts = ["家乡的秋天", "秋天的家乡", "人工智能", "a", ""]
    with run_fake_server(None) as server:
        vectors = embed(spec(server.base_url), texts, batch=2)
    assert vectors == [pytest.approx(fake_embedding(t)) for t in texts]
    near = cosine(vectors[0], vectors[1])
    far = cosine(vectors[0], vectors[2])
    assert near is not None and far is not None and near > far
    assert cosine(vectors[4], vectors[0]) is None  # zero vector


def test_failures_are_embedding_errors() -> None:
    with pytest.raises(EmbeddingError, match=r"ConnectError|refused"):
        embed(spec(closed_port_url()), ["x"])


@pytest.mark.slow
def test_the_embedded_model_serves_embeddings_from_a_server_of_its_own() -> None:
    """``base_url: embedded``: llama.cpp's embedding mode in a server started for the call
    (mean-pooled, one vector per text, in order); the same text twice gives the same
    vector, and near texts are closer than far ones (checked with numpy)."""
    import numpy as np

    from essaybench.llm.registry import EMBEDDED

    smollm = ModelSpec.model_validate({"provider": "local", "base_url": EMBEDDED,
                                       "model_id": "SmolLM2-135M-Instruct.Q4_1",
                                       "family": "smollm", "name": "smollm2-135m"})
    texts = ["家乡的秋天很美。", "我爱家乡的秋天。", "The stock market fell sharply today.",
             "家乡的秋天很美。"]
    vectors = embed(smollm, texts, batch=3)
    assert len(vectors) == 4 and len({len(v) for v in vectors}) == 1 and len(vectors[0]) > 8
    assert vectors[3] == pytest.approx(vectors[0], abs=1e-4)
    a, b = (np.asarray(v) for v in vectors[:2])
    near, far = cosine(vectors[0], vectors[1]), cosine(vectors[0], vectors[2])
    assert near == pytest.approx(float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)))
    assert far is not None and near is not None and near > far
