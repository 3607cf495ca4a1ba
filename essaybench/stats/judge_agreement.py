"""Agreement between judges that scored the same essays. Pure: no store, no IO.

Three views, each over what both judges of a pair scored:

* per essay: Spearman's ρ between the two judges' scores of the essays both scored ok,
  and their mean absolute difference in points;
* per leaderboard: Spearman's ρ between the two judges' model means (a leaderboard is
  the models in order, so this says whether they rank the models alike);
* the disagreement list: the essays whose places in the judges' orders differ most.
  Judges use the 0–100 scale differently (one rarely gives below 60, another spreads
  out), so the gap is measured in percentile ranks, not points: each judge's ok scores
  of the essays every judge scored, ranked (ties averaged) and put on 0–100 as
  100·(rank − ½)/n; the gap is the largest minus the smallest of an essay's percentiles.

Spearman's ρ is ``scipy.stats.spearmanr``'s (the Pearson correlation of the average
ranks); None below :data:`MIN_ITEMS` items or when either side has no spread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

import numpy as np
import polars as pl
from scipy.stats import rankdata, spearmanr

ESSAY_KEYS = ("prompt_id", "model", "sample_index")
MIN_ITEMS = 3  # fewer items than this: no correlation worth printing
DISAGREEMENTS = 10  # essays in the disagreement list

ESSAY_SCHEMA: dict[str, type[pl.DataType]] = {
    "judge_a": pl.Utf8, "judge_b": pl.Utf8, "n_essays": pl.Int64,
    "spearman_rho": pl.Float64, "mean_abs_diff": pl.Float64}
BOARD_SCHEMA: dict[str, type[pl.DataType]] = {
    "judge_a": pl.Utf8, "judge_b": pl.Utf8, "n_models": pl.Int64, "spearman_rho": pl.Float64}


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray
             ) -> float | None:
    """Spearman's ρ of paired values (module doc); None when it says nothing."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"spearman needs two 1-D arrays of one length, got {a.shape}, "
                         f"{b.shape}")
    if len(a) < MIN_ITEMS or np.ptp(a) == 0 or np.ptp(b) == 0:  # no spread: says nothing
        return None
    return float(spearmanr(a, b).statistic)


def _wide(scores: pl.DataFrame, keys: Sequence[str], score: str) -> tuple[pl.DataFrame,
                                                                           list[str]]:
    """One row per essay, one column per judge (its ok score; null: not scored)."""
    judges = sorted({str(j) for j in scores["judge"].to_list()})
    ok = (scores.filter(pl.col(score).is_not_null())
          .group_by(*keys, "judge").agg(pl.col(score).mean()))
    wide = ok.pivot(on="judge", index=list(keys), values=score) if ok.height else \
        pl.DataFrame(schema={k: scores.schema[k] for k in keys})
    for judge in judges:
        if judge not in wide.columns:
            wide = wide.with_columns(pl.lit(None, pl.Float64).alias(judge))
    return wide.sort(list(keys)), judges


def essay_agreement(scores: pl.DataFrame, keys: Sequence[str] = ESSAY_KEYS,
                    score: str = "score") -> pl.DataFrame:
    """Per pair of judges: essays both scored, Spearman's ρ of their scores and the mean
    absolute difference. ``scores``: ``judge``, ``keys`` and ``score`` (null: not ok)."""
    wide, judges = _wide(scores, keys, score)
    rows = []
    for a, b in combinations(judges, 2):
        both = wide.filter(pl.col(a).is_not_null() & pl.col(b).is_not_null())
        x, y = both[a].to_numpy(), both[b].to_numpy()
        rows.append({"judge_a": a, "judge_b": b, "n_essays": both.height,
                     "spearman_rho": spearman(x, y),
                     "mean_abs_diff": float(np.abs(x - y).mean()) if both.height else None})
    return pl.DataFrame(rows, schema=ESSAY_SCHEMA)


def leaderboard_agreement(boards: Mapping[str, Mapping[str, float | None]]) -> pl.DataFrame:
    """Per pair of judges: Spearman's ρ of their means over the models both ranked
    (``boards``: judge → model → mean)."""
    rows = []
    for a, b in combinations(sorted(boards), 2):
        common = sorted(m for m, v in boards[a].items()
                        if v is not None and boards[b].get(m) is not None)
        x = [float(boards[a][m]) for m in common]  # type: ignore[arg-type]
        y = [float(boards[b][m]) for m in common]  # type: ignore[arg-type]
        rows.append({"judge_a": a, "judge_b": b, "n_models": len(common),
                     "spearman_rho": spearman(x, y)})
    return pl.DataFrame(rows, schema=BOARD_SCHEMA)


def percentile_ranks(values: np.ndarray) -> np.ndarray:
    """100·(average rank − ½)/n: where each value sits in its judge's order (0–100)."""
    ranks: np.ndarray = rankdata(values)
    return 100 * (ranks - 0.5) / len(values)


def disagreements(scores: pl.DataFrame, keys: Sequence[str] = ESSAY_KEYS,
                  score: str = "score", top: int = DISAGREEMENTS) -> pl.DataFrame:
    """The ``top`` essays the judges place furthest apart (module doc): ``keys``, ``gap``
    (percentile points), and per judge ``score:<judge>`` and ``pct:<judge>``; largest gap
    first. Over the essays every judge scored ok; empty with fewer than two judges."""
    wide, judges = _wide(scores, keys, score)
    if len(judges) < 2:
        return pl.DataFrame(schema={**{k: scores.schema[k] for k in keys},
                                    "gap": pl.Float64})
    common = wide.drop_nulls(judges)
    if common.height == 0:
        return common.select(*keys, pl.lit(None, pl.Float64).alias("gap")).clear()
    pct = {j: percentile_ranks(common[j].to_numpy()) for j in judges}
    stacked = np.vstack([pct[j] for j in judges])
    out = common.select(*keys).with_columns(
        pl.Series("gap", stacked.max(axis=0) - stacked.min(axis=0)),
        *(pl.Series(f"score:{j}", common[j].to_numpy()) for j in judges),
        *(pl.Series(f"pct:{j}", pct[j]) for j in judges))
    return out.sort(["gap", *keys], descending=[True, *[False] * len(keys)]).head(top)
