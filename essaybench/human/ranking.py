"""Rank items (models) by their mean score with t-intervals on prompt clusters.

The unit is the prompt: intervals are :mod:`essaybench.stats.cluster_t`'s (the
one-sample t-interval of a model's scores when each prompt has one; the paired
t-interval of a difference on the same prompts), which replaced the percentile
bootstrap (it covers ≈ 92% at 15 prompts; issue 25 item 11). A (prompt, model) cell
with no score is missing (NaN), never imputed. Neighbours in the ranking are
*indistinguishable* when the paired-difference CI contains 0 or there is none (fewer
than :data:`~essaybench.stats.cluster_t.MIN_PROMPTS` prompts). ``seed`` and ``n_boot``
are accepted for old callers and not used.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numpy.typing import NDArray

from essaybench.human.annotations import require_columns
from essaybench.stats.cluster_t import cluster_t_differences, cluster_t_means


def score_matrix(df: pl.DataFrame, *, unit: str, item: str,
                 score: str) -> tuple[NDArray[np.float64], list[str], list[str]]:
    """(n_units, n_items) matrix of ``score``, NaN where missing; with unit and item labels."""
    require_columns(df, [unit, item, score], "score_matrix")
    cells = df.filter(pl.col(score).is_not_null()).select(unit, item, score)
    dup = cells.group_by(unit, item).len().filter(pl.col("len") > 1).sort(unit, item)
    if not dup.is_empty():
        first = dup.row(0)
        raise ValueError(f"score_matrix: {dup.height} ({unit}, {item}) cell(s) have several "
                         f"scores, e.g. {first[0]!r}, {first[1]!r}; average them first")
    units = sorted(str(u) for u in cells[unit].unique().to_list())
    items = sorted(str(i) for i in cells[item].unique().to_list())
    row_of = {u: k for k, u in enumerate(units)}
    col_of = {m: k for k, m in enumerate(items)}
    matrix = np.full((len(units), len(items)), np.nan)
    for u, m, s in cells.iter_rows():
        matrix[row_of[str(u)], col_of[str(m)]] = float(s)
    return matrix, units, items


def _opt(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def ranking_with_ci(df: pl.DataFrame, *, seed: int | np.random.Generator, n_boot: int,
                    unit: str = "question_id", item: str = "model", score: str = "score",
                    level: float = 0.95) -> pl.DataFrame:
    """One row per item, best first: rank, mean, CI, n, and the comparison with the next item.

    ``diff_lo``/``diff_hi`` bound (this item − the next one below it);
    ``tied_with_next`` is True when that interval contains 0 (null on the last row).
    """
    matrix, _, items = score_matrix(df, unit=unit, item=item, score=score)
    present = ~np.isnan(matrix)
    sums, counts = np.where(present, matrix, 0.0), present.astype(np.float64)
    result = cluster_t_means(sums, counts, level=level)
    order = sorted(range(len(items)), key=lambda k: (-result.estimate[k], items[k]))
    upper, lower = np.array(order[:-1], dtype=np.intp), np.array(order[1:], dtype=np.intp)
    diffs = cluster_t_differences(sums, counts, upper, lower, level=level)
    rows = []
    for position, k in enumerate(order):
        row: dict[str, object] = {
            "rank": position + 1, item: items[k], "mean": float(result.estimate[k]),
            "lo": _opt(result.lo[k]), "hi": _opt(result.hi[k]),
            "n": int(np.sum(~np.isnan(matrix[:, k]))),
            "next": None, "diff": None, "diff_lo": None, "diff_hi": None,
            "tied_with_next": None}
        if position + 1 < len(order):
            nxt = order[position + 1]
            lo, hi = _opt(diffs.lo[position]), _opt(diffs.hi[position])
            row |= {"next": items[nxt], "diff": float(diffs.estimate[position]),
                    "diff_lo": lo, "diff_hi": hi,
                    "tied_with_next": lo is None or hi is None or lo <= 0.0 <= hi}
        rows.append(row)
    return pl.DataFrame(rows, schema={
        "rank": pl.Int64, item: pl.Utf8, "mean": pl.Float64, "lo": pl.Float64,
        "hi": pl.Float64, "n": pl.Int64, "next": pl.Utf8, "diff": pl.Float64,
        "diff_lo": pl.Float64, "diff_hi": pl.Float64, "tied_with_next": pl.Boolean})
