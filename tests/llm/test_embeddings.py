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
    with pytest.raises(EmbeddingError, match="embedded"):
        embed(spec("embedded"), ["x"])
