"""Reference-based metrics of each essay against its gold item (``bench/gold.py``: the
gold file's format, loading and identity).

Per ok essay of a gold prompt: character ROUGE-L F1 (``lexical.rouge_l``) and chrF
(sacrebleu's sentence chrF, character 6-grams, β = 2; 0 … 1 here) against the reference,
and, when the alerts stage has an embedding model, the cosine of the two embeddings.
These are secondary figures, never the ranking: a good essay can share little with one
reference (many good answers exist; open prompts most of all), overlap rewards copying
the reference's wording, not quality, and an embedding cosine says "about the same
thing", not "as good".
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from essaybench.bench.gold import GoldItem, GoldSet, LoadedGold, load_gold
from essaybench.bench.signals.lexical import content_chars, rouge_l
from essaybench.core.contracts import OK

if TYPE_CHECKING:
    from sacrebleu.metrics.chrf import CHRF

__all__ = ["SCHEMA", "GoldItem", "GoldSet", "LoadedGold", "ReferenceSummary", "chrf",
           "load_gold", "reference_table", "summarise_reference"]

SCHEMA: dict[str, type[pl.DataType]] = {
    "model": pl.Utf8, "prompt_id": pl.Utf8, "sample_index": pl.Int64,
    "ref_rouge_l": pl.Float64, "ref_chrf": pl.Float64, "ref_embedding": pl.Float64}
# (essay, reference) → embedding cosine (None: not computed for that pair)
Similarity = Callable[[str, str], float | None]


def chrf(hypothesis: str, reference: str) -> float | None:
    """sacrebleu's sentence chrF on 0 … 1 (None: an empty text)."""
    if not content_chars(hypothesis) or not content_chars(reference):
        return None
    return float(_chrf().sentence_score(hypothesis, [reference]).score) / 100


@functools.cache
def _chrf() -> CHRF:
    """chrF2, character 6-grams, whitespace ignored; sacrebleu (with lxml, ~8 MiB) is
    imported the first time a run has gold references, not by every run."""
    from sacrebleu.metrics.chrf import CHRF

    return CHRF()


def gold_essays(essays: pl.DataFrame, gold: GoldSet) -> pl.DataFrame:
    """The ok essays of the gold prompts."""
    return essays.filter((pl.col("status") == OK)
                         & pl.col("prompt_id").is_in(list(gold.by_prompt())))


def reference_table(essays: pl.DataFrame, gold: GoldSet,
                    similarity: Similarity | None = None) -> pl.DataFrame:
    """Per ok essay of a gold prompt: ROUGE-L and chrF against its reference, and the
    embedding cosine when ``similarity`` is given (else null)."""
    refs = gold.by_prompt()
    ok = gold_essays(essays, gold)
    rows = [{"model": m, "prompt_id": p, "sample_index": s,
             "ref_rouge_l": rouge_l(t or "", refs[p].reference),
             "ref_chrf": chrf(t or "", refs[p].reference),
             "ref_embedding": similarity(t or "", refs[p].reference) if similarity else None}
            for m, p, s, t in ok.select("model", "prompt_id", "sample_index",
                                         "essay_text").iter_rows()]
    return pl.DataFrame(rows, schema=SCHEMA)


@dataclass(frozen=True)
class ReferenceSummary:
    model: str
    n_essays: int
    median_rouge_l: float | None
    median_chrf: float | None
    median_embedding: float | None = None


def _median(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def summarise_reference(table: pl.DataFrame) -> list[ReferenceSummary]:
    out = []
    for model in sorted(set(table["model"].to_list())):
        rows = table.filter(pl.col("model") == model)
        out.append(ReferenceSummary(model, rows.height, _median(rows["ref_rouge_l"].to_list()),
                                    _median(rows["ref_chrf"].to_list()),
                                    _median(rows["ref_embedding"].to_list())))
    return out
