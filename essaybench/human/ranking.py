"""Rank items (models) by their mean score with paired bootstrap CIs.

The unit of resampling is the prompt: the bootstrap (``essaybench.stats.bootstrap``)
draws prompts with replacement, the same prompts for every model, so a
difference between two models keeps its pairing. A (prompt, model) cell with no
score is missing (NaN), never imputed. Neighbours in the ranking are
*indistinguishable* when the paired-difference CI contains 0.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numpy.typing import NDArray

from essaybench.human.annotations import require_columns
from essaybench.stats.bootstrap import difference_ci, indistinguishable, paired_bootstrap_means


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


def ranking_with_ci(df: pl.DataFrame, *, seed: int | np.random.Generator, n_boot: int,
                    unit: str = "question_id", item: str = "model", score: str = "score",
                    level: float = 0.95) -> pl.DataFrame:
    """One row per item, best first: rank, mean, CI, n, and the comparison with the next item.

    ``diff_lo``/``diff_hi`` bound (this item − the next one below it);
    ``tied_with_next`` is True when that interval contains 0 (null on the last row).
    """
    matrix, _, items = score_matrix(df, unit=unit, item=item, score=score)
    result = paired_bootstrap_means(matrix, n_boot=n_boot, level=level, seed=seed)
    order = sorted(range(len(items)), key=lambda k: (-result.mean[k], items[k]))
    rows = []
    for position, k in enumerate(order):
        row: dict[str, object] = {
            "rank": position + 1, item: items[k], "mean": float(result.mean[k]),
            "lo": float(result.lo[k]), "hi": float(result.hi[k]),
            "n": int(np.sum(~np.isnan(matrix[:, k]))),
            "next": None, "diff": None, "diff_lo": None, "diff_hi": None,
            "tied_with_next": None}
        if position + 1 < len(order):
            nxt = order[position + 1]
            lo, hi = difference_ci(result.boot, k, nxt, level)
            row |= {"next": items[nxt], "diff": float(result.mean[k] - result.mean[nxt]),
                    "diff_lo": lo, "diff_hi": hi,
                    "tied_with_next": indistinguishable(result.boot, k, nxt, level)}
        rows.append(row)
    return pl.DataFrame(rows, schema={
        "rank": pl.Int64, item: pl.Utf8, "mean": pl.Float64, "lo": pl.Float64,
        "hi": pl.Float64, "n": pl.Int64, "next": pl.Utf8, "diff": pl.Float64,
        "diff_lo": pl.Float64, "diff_hi": pl.Float64, "tied_with_next": pl.Boolean})
