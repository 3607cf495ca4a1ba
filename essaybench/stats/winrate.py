"""Pairwise win rates with seeded prompt-bootstrap CIs.

Input: the pairwise outcome table described in :mod:`essaybench.stats.outcomes`
(one row per judge, prompt and model pair after order-swap merging). Win rate
of model_a over model_b = (wins + ½·ties) / n over ok rows; failed rows are
excluded from n and reported in ``failed``.

Intervals resample prompts (cluster = ``prompt_id``) with replacement, jointly
for every pair of one judge, so all comparisons made on a prompt — both orders
included, if the table still holds them — stay together. A pair is
"indistinguishable at this sample size" when its interval contains ½.

Orientation: with ``baseline`` set, every pair involving the baseline is
reported as (model, baseline) — the "against a baseline" design; any other pair
(the "all pairs" design) is reported once, models in alphabetical order.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from essaybench.stats.bootstrap import (
    as_generator,
    check_level,
    check_n_boot,
    paired_bootstrap_ratio,
)
from essaybench.stats.outcomes import FIRST, OK, SECOND, TIE, encode

WINRATE_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    "judge": pl.Utf8, "model_a": pl.Utf8, "model_b": pl.Utf8, "win_rate": pl.Float64,
    "ci_lo": pl.Float64, "ci_hi": pl.Float64, "wins": pl.Int64, "losses": pl.Int64,
    "ties": pl.Int64, "n": pl.Int64, "failed": pl.Int64, "indistinguishable": pl.Boolean,
}


def _failed_by_pair(outcomes: pl.DataFrame) -> dict[tuple[str, str], int]:
    if "status" not in outcomes.columns:
        return {}
    failed = outcomes.filter(~(pl.col("status") == OK).fill_null(False))
    out: dict[tuple[str, str], int] = {}
    for a, b in failed.select("model_a", "model_b").iter_rows():
        key = (min(str(a), str(b)), max(str(a), str(b)))
        out[key] = out.get(key, 0) + 1
    return out


def _judge_rows(judge: str, outcomes: pl.DataFrame, baseline: str | None, n_boot: int,
                level: float, rng: np.random.Generator) -> list[dict[str, object]]:
    failed = _failed_by_pair(outcomes)
    enc = encode(outcomes)
    rows: list[dict[str, object]] = []
    if len(enc.pairs):
        counts = enc.counts
        sums = counts[:, :, FIRST] + 0.5 * counts[:, :, TIE]
        res = paired_bootstrap_ratio(sums, counts.sum(axis=2), n_boot=n_boot, level=level,
                                     seed=rng)
        totals = enc.totals()
        for k, (i, j) in enumerate(enc.pairs):
            a, b = enc.models[i], enc.models[j]
            rate, lo, hi = float(res.mean[k]), float(res.lo[k]), float(res.hi[k])
            wins, losses = int(totals[k, FIRST]), int(totals[k, SECOND])
            if baseline is not None and a == baseline:
                a, b, rate, lo, hi, wins, losses = b, a, 1 - rate, 1 - hi, 1 - lo, losses, wins
            rows.append({"judge": judge, "model_a": a, "model_b": b, "win_rate": rate,
                         "ci_lo": lo, "ci_hi": hi, "wins": wins, "losses": losses,
                         "ties": int(totals[k, TIE]), "n": int(totals[k].sum()),
                         "failed": failed.pop((min(a, b), max(a, b)), 0),
                         "indistinguishable": bool(lo <= 0.5 <= hi)})
    # Pairs whose every comparison failed: reported with n = 0, never as a rate.
    for (a, b), n_failed in sorted(failed.items()):
        if baseline is not None and a == baseline:
            a, b = b, a
        rows.append({"judge": judge, "model_a": a, "model_b": b, "win_rate": None,
                     "ci_lo": None, "ci_hi": None, "wins": 0, "losses": 0, "ties": 0,
                     "n": 0, "failed": n_failed, "indistinguishable": True})
    return rows


def win_rates(outcomes: pl.DataFrame, *, baseline: str | None = None, n_boot: int = 2000,
              level: float = 0.95, seed: int | np.random.Generator = 0) -> pl.DataFrame:
    """One row per (judge, model pair): win rate of model_a over model_b with its CI.

    Judges are processed in sorted order from one generator; a table without a
    ``judge`` column is one judge named "".
    """
    level, n_boot = check_level(level), check_n_boot(n_boot)
    rng = as_generator(seed)
    if "judge" not in outcomes.columns:
        outcomes = outcomes.with_columns(pl.lit("").alias("judge"))
    rows: list[dict[str, object]] = []
    for judge in sorted({str(j) for j in outcomes["judge"].to_list()}):
        rows += _judge_rows(judge, outcomes.filter(pl.col("judge") == judge), baseline,
                            n_boot, level, rng)
    return pl.DataFrame(rows, schema=WINRATE_SCHEMA)
