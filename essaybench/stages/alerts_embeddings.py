"""Embedding cosine for the judge-free signals, when ``alerts.signals.embedding_model``
names a registry model serving ``/v1/embeddings`` (``llm/embeddings.py``).

Per model, the median cosine of this week's essay to the comparable run's on the same
prompt (drift) and of each essay to its prompt (relevance). Figures only: no band or
threshold reads them yet (lexical figures drive the alerts). A failing endpoint is
recorded as the figure's error, never a failed stage.
"""

from __future__ import annotations

import statistics
from typing import Any

import polars as pl

from essaybench.bench.signals.reference import Similarity
from essaybench.core.contracts import OK
from essaybench.llm.embeddings import EmbeddingError, cosine, embed
from essaybench.llm.registry import load_registry

KEYS = ["model", "prompt_id", "sample_index"]


def _medians(rows: list[tuple[str, float | None]]) -> dict[str, float | None]:
    by: dict[str, list[float]] = {}
    for model, value in rows:
        if value is not None:
            by.setdefault(model, []).append(value)
    return {m: statistics.median(v) for m, v in sorted(by.items())}


def embedding_meta(model_name: str, essays_now: pl.DataFrame,
                   essays_before: pl.DataFrame | None) -> dict[str, Any]:
    """``{"model", "drift": {model: median}, "relevance": {model: median}}`` or, when
    the endpoint fails, ``{"model", "error"}``."""
    try:
        spec = load_registry().models.get(model_name)
        if spec is None:
            return {"model": model_name, "error": "not in the model registry"}
        now = essays_now.filter(pl.col("status") == OK).select(
            *KEYS, "prompt_text", "essay_text")
        texts = sorted({t or "" for t in [*now["essay_text"], *now["prompt_text"]]})
        pairs = pl.DataFrame()
        if essays_before is not None:
            before = essays_before.filter(pl.col("status") == OK).select(*KEYS, "essay_text")
            pairs = now.join(before, on=KEYS, suffix="_before")
            texts = sorted({*texts, *(t or "" for t in pairs["essay_text_before"])})
        vectors = dict(zip(texts, embed(spec, texts), strict=True))
    except EmbeddingError as exc:
        return {"model": model_name, "error": str(exc)}
    relevance = _medians([(m, cosine(vectors[p or ""], vectors[e or ""]))
                          for m, p, e in now.select("model", "prompt_text",
                                                    "essay_text").iter_rows()])
    drift = (_medians([(m, cosine(vectors[a or ""], vectors[b or ""]))
                       for m, a, b in pairs.select("model", "essay_text",
                                                   "essay_text_before").iter_rows()])
             if pairs.height else {})
    return {"model": model_name, "drift": drift, "relevance": relevance}


def embedding_similarity(model_name: str, texts: list[str]
                         ) -> tuple[Similarity | None, str | None]:
    """The cosine of any two of ``texts`` by ``model_name``'s embeddings (each text
    embedded once), or (None, the error) when the endpoint fails."""
    try:
        spec = load_registry().models.get(model_name)
        if spec is None:
            return None, "not in the model registry"
        unique = sorted(set(texts))
        vectors = dict(zip(unique, embed(spec, unique), strict=True))
    except EmbeddingError as exc:
        return None, str(exc)

    def similarity(a: str, b: str) -> float | None:
        return cosine(vectors[a], vectors[b]) if a in vectors and b in vectors else None

    return similarity, None
