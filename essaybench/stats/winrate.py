"""Pairwise win rates with cluster-t CIs over prompts.

Input: the pairwise outcome table described in :mod:`essaybench.stats.outcomes`
(one row per judge, prompt and model pair after order-swap merging). Win rate
of model_a over model_b = (wins + ½·ties) / n over ok rows; failed rows are
excluded from n and reported in ``failed``.

Intervals are the t-interval on prompt clusters of :mod:`essaybench.stats.cluster_t`
(cluster = ``prompt_id``: all comparisons made on a prompt — both orders included, if
the table still holds them — are one unit), clipped to [0, 1]; the percentile bootstrap
they replace covers ≈ 92% at 15 prompts (``benchmarks/ci_coverage.py``, issue 25 item 11).
A pair needs :data:`~essaybench.stats.cluster_t.MIN_PROMPTS` prompts for an interval
(``ci_note`` says why there is none). A pair won (or lost) on every one of its n ≥
MIN_PROMPTS prompts has no spread for a t-interval: its bounds are the exact
Clopper–Pearson ones for n successes in n prompts, [(α/2)^{1/n}, 1] (or the mirror
image). A pair is "indistinguishable at this sample size" when its interval contains ½
or it has none. ``n_boot`` and ``seed`` are accepted for old callers and not used.

Orientation: with ``baseline`` set, every pair involving the baseline is
reported as (model, baseline) — the "against a baseline" design; any other pair
(the "all pairs" design) is reported once, models in alphabetical order.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from essaybench.stats.bootstrap import check_level, check_n_boot
from essaybench.stats.cluster_t import NOTE_NO_SPREAD, cluster_t_means
from essaybench.stats.outcomes import FIRST, OK, SECOND, TIE, encode

WINRATE_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    "judge": pl.Utf8, "model_a": pl.Utf8, "model_b": pl.Utf8, "win_rate": pl.Float64,
    "ci_lo": pl.Float64, "ci_hi": pl.Float64, "wins": pl.Int64, "losses": pl.Int64,
    "ties": pl.Int64, "n": pl.Int64, "failed": pl.Int64, "indistinguishable": pl.Boolean,
    "ci_note": pl.Utf8,
}
NOTE_ALL_SAME = "won or lost on every prompt: exact (Clopper–Pearson) bounds over prompts"


def _failed_by_pair(outcomes: pl.DataFrame) -> dict[tuple[str, str], int]:
    if "status" not in outcomes.columns:
        return {}
    failed = outcomes.filter(~(pl.col("status") == OK).fill_null(False))
    out: dict[tuple[str, str], int] = {}
    for a, b in failed.select("model_a", "model_b").iter_rows():
        key = (min(str(a), str(b)), max(str(a), str(b)))
        out[key] = out.get(key, 0) + 1
    return out


def _intervals(sums: np.ndarray, counts: np.ndarray,
               level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(rate, lo, hi, note) per pair column: cluster t clipped to [0, 1]; Clopper–Pearson
    over prompts for a pair won or lost on every prompt."""
    res = cluster_t_means(sums, counts, level=level)
    lo, hi = np.clip(res.lo, 0.0, 1.0), np.clip(res.hi, 0.0, 1.0)
    notes = list(res.note)
    tail = (1.0 - level) / 2.0
    for k, note in enumerate(res.note):
        if note == NOTE_NO_SPREAD and res.estimate[k] in (0.0, 1.0):
            bound = tail ** (1.0 / float(res.n_prompts[k]))
            lo[k], hi[k] = (bound, 1.0) if res.estimate[k] == 1.0 else (0.0, 1.0 - bound)
            notes[k] = NOTE_ALL_SAME
    return res.estimate, lo, hi, notes


def _judge_rows(judge: str, outcomes: pl.DataFrame, baseline: str | None,
                level: float) -> list[dict[str, object]]:
    failed = _failed_by_pair(outcomes)
    enc = encode(outcomes)
    rows: list[dict[str, object]] = []
    if len(enc.pairs):
        counts = enc.counts
        sums = counts[:, :, FIRST] + 0.5 * counts[:, :, TIE]
        mean, los, his, notes = _intervals(sums, counts.sum(axis=2), level)
        totals = enc.totals()
        for k, (i, j) in enumerate(enc.pairs):
            a, b = enc.models[i], enc.models[j]
            rate, lo, hi = float(mean[k]), float(los[k]), float(his[k])
            wins, losses = int(totals[k, FIRST]), int(totals[k, SECOND])
            if baseline is not None and a == baseline:
                a, b, rate, lo, hi, wins, losses = b, a, 1 - rate, 1 - hi, 1 - lo, losses, wins
            rows.append({"judge": judge, "model_a": a, "model_b": b, "win_rate": rate,
                         "wins": wins, "losses": losses,
                         "ties": int(totals[k, TIE]), "n": int(totals[k].sum()),
                         "failed": failed.pop((min(a, b), max(a, b)), 0),
                         "ci_lo": None if math.isnan(lo) else lo,
                         "ci_hi": None if math.isnan(hi) else hi,
                         "indistinguishable": bool(math.isnan(lo) or lo <= 0.5 <= hi),
                         "ci_note": notes[k] or None})
    # Pairs whose every comparison failed: reported with n = 0, never as a rate.
    for (a, b), n_failed in sorted(failed.items()):
        if baseline is not None and a == baseline:
            a, b = b, a
        rows.append({"judge": judge, "model_a": a, "model_b": b, "win_rate": None,
                     "ci_lo": None, "ci_hi": None, "wins": 0, "losses": 0, "ties": 0,
                     "n": 0, "failed": n_failed, "indistinguishable": True,
                     "ci_note": "no ok comparison"})
    return rows


def win_rates(outcomes: pl.DataFrame, *, baseline: str | None = None, n_boot: int = 2000,
              level: float = 0.95, seed: int | np.random.Generator = 0) -> pl.DataFrame:
    """One row per (judge, model pair): win rate of model_a over model_b with its CI.

    A table without a ``judge`` column is one judge named "". Deterministic: ``n_boot``
    and ``seed`` are checked and otherwise unused (see the module docstring).
    """
    level, n_boot = check_level(level), check_n_boot(n_boot)
    if "judge" not in outcomes.columns:
        outcomes = outcomes.with_columns(pl.lit("").alias("judge"))
    rows: list[dict[str, object]] = []
    for judge in sorted({str(j) for j in outcomes["judge"].to_list()}):
        rows += _judge_rows(judge, outcomes.filter(pl.col("judge") == judge), baseline,
                            level)
    return pl.DataFrame(rows, schema=WINRATE_SCHEMA)
