"""Does a signal separate human quality tiers? (the paper's sensitivity analysis)

Items carry a human tier (high / medium / low) and a signal: a judge's score
in any scoring variant (``score_weighted``, ``score_unweighted``,
``align_total``) or any baseline such as response length. For each pair of
tiers (high > medium, medium > low, high > low):

* ``u_share`` = U / (n_higher · n_lower): the share of (higher-tier,
  lower-tier) item pairs where the higher-tier item has the higher signal, ties
  counted half. 0.5 = no separation, 1 = perfect.
* ``p_value``: one-sided Mann–Whitney U test that the higher tier's signal is
  stochastically greater (scipy ``mannwhitneyu``, ``alternative="greater"``;
  exact for small samples without ties, else the tie-corrected normal
  approximation).
* ``mean_diff`` = mean(higher) − mean(lower), which is also the mean of the
  pairwise differences x_i − y_j; ``sd_diff`` is the standard deviation of
  those n_higher · n_lower pairwise differences (= sqrt(var(x) + var(y)),
  population variances); ``se_diff`` is the (Welch) standard error of
  ``mean_diff``, sqrt(s_x²/n_x + s_y²/n_y) with sample variances.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import asdict, dataclass

import numpy as np
import polars as pl
from numpy.typing import ArrayLike
from scipy import stats

from essaybench.human.annotations import require_columns

TIERS = ("high", "medium", "low")
TIER_PAIRS = (("high", "medium"), ("medium", "low"), ("high", "low"))


@dataclass(frozen=True)
class TierComparison:
    higher: str
    lower: str
    n_higher: int
    n_lower: int
    u_statistic: float
    u_share: float
    p_value: float
    mean_diff: float
    sd_diff: float
    se_diff: float


def compare_tiers(higher: ArrayLike, lower: ArrayLike, *, higher_name: str = "higher",
                  lower_name: str = "lower") -> TierComparison:
    """Mann–Whitney share, one-sided p-value and mean difference; NaN when a tier is empty."""
    x = np.asarray(higher, dtype=np.float64)
    y = np.asarray(lower, dtype=np.float64)
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError(f"signal values of tiers {higher_name!r} and {lower_name!r} must be "
                         "finite (drop missing values first)")
    if x.size == 0 or y.size == 0:
        nan = math.nan
        return TierComparison(higher_name, lower_name, int(x.size), int(y.size),
                              nan, nan, nan, nan, nan, nan)
    res = stats.mannwhitneyu(x, y, alternative="greater")
    u = float(res.statistic)
    se = (math.sqrt(x.var(ddof=1) / x.size + y.var(ddof=1) / y.size)
          if x.size > 1 and y.size > 1 else math.nan)
    return TierComparison(
        higher=higher_name, lower=lower_name, n_higher=int(x.size), n_lower=int(y.size),
        u_statistic=u, u_share=u / (x.size * y.size), p_value=float(res.pvalue),
        mean_diff=float(x.mean() - y.mean()),
        sd_diff=math.sqrt(float(x.var()) + float(y.var())), se_diff=se)


def tier_sensitivity(items: pl.DataFrame, *, signal: str, tier: str = "tier",
                     by: str | None = None) -> pl.DataFrame:
    """One row per tier pair (and per ``by`` group, if given) for the ``signal`` column.

    Rows whose signal or tier is null are left out; ``n_higher``/``n_lower``
    say how many items each comparison used.
    """
    require_columns(items, [signal, tier] + ([by] if by else []), "tier_sensitivity")
    unknown = set(items[tier].drop_nulls().unique().to_list()) - set(TIERS)
    if unknown:
        raise ValueError(f"tier_sensitivity: column {tier!r} has unknown tiers {sorted(unknown)}; "
                         f"expected {list(TIERS)}")
    usable = items.filter(pl.col(signal).is_not_null() & pl.col(tier).is_not_null())
    groups: list[tuple[str | None, pl.DataFrame]] = [(None, usable)]
    if by is not None:
        groups = [(str(key), g) for (key,), g in
                  sorted(usable.group_by(by), key=lambda kv: str(kv[0][0]))] + groups
    rows = []
    for key, group in groups:
        for high, low in TIER_PAIRS:
            cmp = compare_tiers(group.filter(pl.col(tier) == high)[signal],
                                group.filter(pl.col(tier) == low)[signal],
                                higher_name=high, lower_name=low)
            row: dict[str, object] = {"signal": signal}
            if by is not None:
                row[by] = "overall" if key is None else key
            rows.append(row | asdict(cmp))
    return pl.DataFrame(rows)


def tiers_from_scores(scores: pl.Expr | str, *, high: Collection[float],
                      medium: Collection[float], low: Collection[float]) -> pl.Expr:
    """An expression mapping human scores to tiers, e.g. WritingPreferenceBench's
    high = {3}, medium = {2}, low = {0, 1}; other scores map to null."""
    sets = [set(high), set(medium), set(low)]
    if any(a & b for i, a in enumerate(sets) for b in sets[i + 1:]):
        raise ValueError(f"tiers overlap: high={sorted(sets[0])}, medium={sorted(sets[1])}, "
                         f"low={sorted(sets[2])}")
    col = pl.col(scores) if isinstance(scores, str) else scores
    return (pl.when(col.is_in(list(sets[0]))).then(pl.lit("high"))
            .when(col.is_in(list(sets[1]))).then(pl.lit("medium"))
            .when(col.is_in(list(sets[2]))).then(pl.lit("low"))
            .otherwise(pl.lit(None, dtype=pl.Utf8)))
