"""Embeddings from a registry model serving the OpenAI-compatible ``/v1/embeddings``.

A plain synchronous client for the judge-free signals (``bench/signals``): texts go in
batches, vectors come back in input order. Not the chat gateway: no ledger, no rate
limits, no cost accounting (embedding calls are cheap and not part of the measurement);
a failure is an :class:`EmbeddingError` with one line. ``base_url: embedded`` (the
llama.cpp model the project starts itself): a server of its own in llama.cpp's embedding
mode (mean-pooled hidden states of SmolLM2, a chat model: a crude embedding, enough to
prove the path offline) runs for the call.
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
        return _embedded(texts, batch, timeout_s)
    key = spec.api_key()
    return _post_all(spec.base_url, spec.model_id, key, texts, batch, timeout_s)


def _embedded(texts: Sequence[str], batch: int, timeout_s: float) -> list[list[float]]:
    from essaybench.llm.embedded import (
        EmbeddedRuntimeMissingError,
        EmbeddedServer,
        EmbeddedServerError,
        embedded_model_id,
        require_runtime,
    )

    try:
        require_runtime()
        with EmbeddedServer(embedding=True) as server:
            return _post_all(server.base_url, embedded_model_id(), None, texts, batch,
                             max(timeout_s, 120.0),  # CPU-bound: 1 slot, long texts
                             trust_env=False)  # a proxy must not capture loopback
    except (EmbeddedServerError, EmbeddedRuntimeMissingError, FileNotFoundError) as exc:
        raise EmbeddingError(f"embedded model: {str(exc).splitlines()[0]}"[:300]) from None


def _post_all(base_url: str, model_id: str, key: str | None, texts: Sequence[str],
              batch: int, timeout_s: float, trust_env: bool = True) -> list[list[float]]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    url = base_url.rstrip("/") + "/embeddings"
    out: list[list[float]] = []
    with httpx.Client(timeout=timeout_s, headers=headers, trust_env=trust_env) as client:
        for start in range(0, len(texts), batch):
            chunk = list(texts[start:start + batch])
            try:
                reply = client.post(url, json={"model": model_id, "input": chunk})
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
