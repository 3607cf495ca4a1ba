"""Length bias of a score: does it rise with the response's length?

Per length measure (Chinese characters, the source's word count, …):

* Spearman ρ between score and length over all rows (scipy), two-sided p.
* Pooled OLS slope of score on length, in score points per ``per`` length
  units (default per 1,000 characters), with its standard error, p-value and
  95% CI (statsmodels OLS, classical errors).
* Within-prompt slope: the same regression with one intercept per prompt
  (fixed effects), so a prompt that asks for long answers and happens to get
  high scores does not count as length bias. Computed by demeaning score and
  length within each prompt (Frisch–Waugh–Lovell: the same slope as the
  regression with one dummy per prompt, without its n × n_prompts design),
  with classical errors on n − n_prompts − 1 degrees of freedom.
* Within-prompt Spearman: Spearman ρ between score and length among the rows of each
  prompt (e.g. the ~20 models' answers to it), averaged over the prompts where it is
  defined (at least 3 rows, neither score nor length constant; ``within_spearman_n``
  counts them), with a two-sided one-sample t-test of the per-prompt ρ against 0
  (``within_spearman_p``; prompts taken as independent). Unlike the pooled ρ it cannot
  be moved by prompts that ask for long answers and get high scores.

Rows with a null length or score are left out and counted (``n_excluded``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import polars as pl
from scipy import stats

from essaybench.human.agreement import spearman
from essaybench.human.annotations import require_columns


@dataclass(frozen=True)
class LengthBias:
    length: str
    per: float
    n: int
    n_excluded: int
    spearman: float
    spearman_p: float
    slope: float
    slope_se: float
    slope_p: float
    slope_lo: float
    slope_hi: float
    within_slope: float
    within_se: float
    within_p: float
    n_groups: int
    within_spearman: float
    within_spearman_p: float
    within_spearman_n: int


def _fit(y: np.ndarray, design: np.ndarray) -> tuple[float, float, float, float, float]:
    # imported here, not with the module: see human/agreement.py (~100 MiB per run)
    from statsmodels.regression.linear_model import OLS

    fit = OLS(y, design).fit()
    lo, hi = fit.conf_int(0.05)[0]
    return (float(fit.params[0]), float(fit.bse[0]), float(fit.pvalues[0]), float(lo), float(hi))


def _demean(v: np.ndarray, index: np.ndarray, n_groups: int) -> np.ndarray:
    sums = np.bincount(index, weights=v, minlength=n_groups)
    sizes = np.bincount(index, minlength=n_groups)
    return np.asarray(v - (sums / sizes)[index], dtype=np.float64)


def _within_slope(y: np.ndarray, x: np.ndarray, index: np.ndarray,
                  n_groups: int) -> tuple[float, float, float]:
    yd, xd = _demean(y, index, n_groups), _demean(x, index, n_groups)
    sxx = float(xd @ xd)
    if sxx == 0.0:
        return (np.nan, np.nan, np.nan)
    slope = float(xd @ yd) / sxx
    dof = x.size - n_groups - 1
    resid = yd - slope * xd
    se = float(np.sqrt((resid @ resid) / dof / sxx))
    p = float(2 * stats.t.sf(abs(slope / se), dof)) if se > 0 else np.nan
    return slope, se, p


def within_spearman(y: np.ndarray, x: np.ndarray,
                    index: np.ndarray) -> tuple[float, float, int]:
    """Mean over groups of the per-group Spearman ρ of (x, y), its one-sample t-test p,
    and how many groups have a defined ρ (≥ 3 rows, neither side constant)."""
    order = np.argsort(index, kind="stable")
    bounds = np.flatnonzero(np.diff(index[order])) + 1
    rhos = []
    for rows in np.split(order, bounds):
        if rows.size >= 3 and np.ptp(x[rows]) > 0 and np.ptp(y[rows]) > 0:
            rhos.append(spearman(x[rows], y[rows]).statistic)
    if not rhos:
        return np.nan, np.nan, 0
    values = np.asarray(rhos)
    p = (float(stats.ttest_1samp(values, 0.0).pvalue)
         if values.size > 1 and np.ptp(values) > 0 else np.nan)
    return float(values.mean()), p, int(values.size)


def length_bias(df: pl.DataFrame, *, score: str, length: str, group: str | None = None,
                per: float = 1000.0) -> LengthBias:
    """Length bias of ``score`` against ``length``; ``group`` (e.g. the prompt id) enables
    the within-group slope (NaN without it)."""
    require_columns(df, [score, length] + ([group] if group else []), "length_bias")
    if per <= 0:
        raise ValueError(f"length_bias: per must be positive, got {per}")
    usable = df.filter(pl.col(score).is_not_null() & pl.col(length).is_not_null())
    if usable.height < 3:
        raise ValueError(f"length_bias: {usable.height} rows with both {score!r} and "
                         f"{length!r}; need at least 3")
    y = usable[score].cast(pl.Float64).to_numpy()
    x = usable[length].cast(pl.Float64).to_numpy() / per
    rho = spearman(x, y)
    slope, se, p, lo, hi = _fit(y, np.column_stack([x, np.ones_like(x)]))
    within = (np.nan, np.nan, np.nan)
    ranks: tuple[float, float, int] = (np.nan, np.nan, 0)
    n_groups = 0
    if group is not None:
        codes = usable[group].cast(pl.Utf8).to_numpy()
        _, index = np.unique(codes, return_inverse=True)
        n_groups = int(index.max()) + 1
        if x.size > n_groups + 1:
            within = _within_slope(y, x, index, n_groups)
        ranks = within_spearman(y, x, index)
    return LengthBias(length=length, per=per, n=usable.height,
                      n_excluded=df.height - usable.height,
                      spearman=rho.statistic, spearman_p=rho.p_value,
                      slope=slope, slope_se=se, slope_p=p, slope_lo=lo, slope_hi=hi,
                      within_slope=within[0], within_se=within[1], within_p=within[2],
                      n_groups=n_groups, within_spearman=ranks[0],
                      within_spearman_p=ranks[1], within_spearman_n=ranks[2])


def length_bias_table(df: pl.DataFrame, *, score: str, lengths: list[str],
                      group: str | None = None, per: float = 1000.0) -> pl.DataFrame:
    """:func:`length_bias` for each length column, one row each."""
    return pl.DataFrame([asdict(length_bias(df, score=score, length=name, group=group, per=per))
                         for name in lengths])
