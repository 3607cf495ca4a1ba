"""Embeddings from a registry model serving the OpenAI-compatible ``/v1/embeddings``.

A plain synchronous client for the judge-free signals (``bench/signals``): texts go in
batches, vectors come back in input order. Not the chat gateway: no ledger, no rate
limits, no cost accounting (embedding calls are cheap and not part of the measurement);
a failure is an :class:`EmbeddingError` with one line. ``base_url: embedded`` (the
llama.cpp model the project starts itself) is not supported here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import httpx

from essaybench.llm.registry import EMBEDDED, ModelSpec


class EmbeddingError(RuntimeError):
    """The embeddings endpoint failed or answered something malformed."""


def embed(spec: ModelSpec, texts: Sequence[str], batch: int = 32,
          timeout_s: float = 30.0) -> list[list[float]]:
    """One vector per text of ``texts``, from ``spec``'s ``/embeddings``."""
    if spec.base_url == EMBEDDED:
        raise EmbeddingError("embeddings from the embedded llama.cpp model are not supported")
    key = spec.api_key()
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    url = spec.base_url.rstrip("/") + "/embeddings"
    out: list[list[float]] = []
    with httpx.Client(timeout=timeout_s, headers=headers) as client:
        for start in range(0, len(texts), batch):
            chunk = list(texts[start:start + batch])
            try:
                reply = client.post(url, json={"model": spec.model_id, "input": chunk})
                reply.raise_for_status()
                data = reply.json()["data"]
                vectors = [[float(x) for x in row["embedding"]]
                           for row in sorted(data, key=lambda r: int(r["index"]))]
            except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
                raise EmbeddingError(f"{url}: {type(exc).__name__}: {exc}"[:300]) from None
            if len(vectors) != len(chunk):
                raise EmbeddingError(f"{url}: {len(vectors)} vectors for {len(chunk)} texts")
            out += vectors
    return out


def cosine(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Cosine similarity (None: a zero vector)."""
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(x * x for x in b))
    if not na or not nb:
        return None
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb)
