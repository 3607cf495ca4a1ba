"""Output drift: this week's essay against the comparable run's on the same prompt.

A model samples a different essay every week even when nothing changed, so a fixed
similarity threshold means nothing: what alerts is a weekly median below the model's
own history. Per model and week the statistic is the median, over the prompts both runs
answered (same prompt id and sample index, both ok), of the pair's similarity. The band
comes from the model's earlier weekly medians ``h`` (at most ``history_weeks``, the
newest): its lower edge is ``mean(h) − max(band_k·sd(h), band_min_drop)`` (sd with n−1).
Fewer than ``min_history`` earlier medians: no band, no alert (the verdict says so).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Literal

import polars as pl

from essaybench.bench.signals.lexical import ngram_dice, rouge_l
from essaybench.bench.signals.params import SignalParams
from essaybench.core.contracts import OK

KEYS = ("model", "prompt_id", "sample_index")
PAIR_SCHEMA: dict[str, type[pl.DataType]] = {
    "model": pl.Utf8, "prompt_id": pl.Utf8, "sample_index": pl.Int64,
    "ngram_dice": pl.Float64, "rouge_l": pl.Float64}
Verdict = Literal["within", "below", "no_band"]


def drift_pairs(essays_now: pl.DataFrame, essays_before: pl.DataFrame,
                ngram: int = 3) -> pl.DataFrame:
    """One row per (model, prompt, sample) ok in both generate snapshots: the pair's
    character n-gram Dice and ROUGE-L."""
    cols = [*KEYS, "essay_text"]
    now = essays_now.filter(pl.col("status") == OK).select(cols)
    before = essays_before.filter(pl.col("status") == OK).select(cols)
    joined = now.join(before, on=list(KEYS), how="inner", suffix="_before").sort(list(KEYS))
    rows = [{"model": m, "prompt_id": p, "sample_index": s,
             "ngram_dice": ngram_dice(a or "", b or "", ngram),
             "rouge_l": rouge_l(a or "", b or "")}
            for m, p, s, a, b in joined.select(
                *KEYS, "essay_text", "essay_text_before").iter_rows()]
    return pl.DataFrame(rows, schema=PAIR_SCHEMA)


@dataclass(frozen=True)
class DriftSummary:
    """One model's week: the distribution of its pair similarities and its band verdict."""

    model: str
    n_pairs: int
    median: float | None
    q1: float | None
    q3: float | None
    history: tuple[float, ...]  # earlier weekly medians, newest first
    band_low: float | None
    verdict: Verdict

    def reason(self, params: SignalParams) -> str:
        if self.verdict == "no_band":
            return (f"{len(self.history)} of {params.min_history} earlier weeks: "
                    "no band yet")
        return f"band low {self.band_low:.3f} from {len(self.history)} earlier weeks"


def band_low(history: list[float], params: SignalParams) -> float | None:
    """The lower edge of the band from earlier medians (None: too little history)."""
    h = history[:params.history_weeks]
    if len(h) < params.min_history:
        return None
    mean, sd = statistics.fmean(h), statistics.stdev(h)
    return mean - max(params.band_k * sd, params.band_min_drop)


def summarise(pairs: pl.DataFrame, history: dict[str, list[float]],
              params: SignalParams) -> list[DriftSummary]:
    """Per model of ``pairs``: quartiles of ``params.drift_measure`` and the verdict
    against ``history`` (per model, its earlier weekly medians, newest first)."""
    out = []
    for model in sorted(set(pairs["model"].to_list())):
        values = [float(v) for v in pairs.filter(pl.col("model") == model)[
            params.drift_measure].drop_nulls().to_list()]
        hist = tuple(history.get(model, [])[:params.history_weeks])
        if not values:
            out.append(DriftSummary(model, 0, None, None, None, hist, None, "no_band"))
            continue
        med = statistics.median(values)
        q1, _, q3 = (statistics.quantiles(values, n=4, method="inclusive")
                     if len(values) > 1 else (values[0], values[0], values[0]))
        low = band_low(list(hist), params)
        verdict: Verdict = "no_band" if low is None else ("below" if med < low else "within")
        out.append(DriftSummary(model, len(values), med, q1, q3, hist, low, verdict))
    return out
