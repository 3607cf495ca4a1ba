"""Agreement statistics: among annotators, and between two sets of scores.

* Fleiss' κ among several annotators (statsmodels ``fleiss_kappa`` on the
  ``aggregate_raters`` count table). Fleiss' κ needs the same number of raters
  on every item: items with another count are left out and *counted*
  (:attr:`FleissKappa.n_items_dropped`), never silently.
* Two raters on an ordinal scale: exact agreement, agreement within ±1,
  Cohen's κ unweighted (every disagreement counts the same) and with linear and
  quadratic weights (sklearn), Spearman ρ and Kendall τ-b with two-sided p-values
  (scipy).

Weighted κ measures disagreement by the distance between category *indices*.
For integer scores every integer from the lowest to the highest observed value
is passed as a category, so 1 vs 3 counts as two steps apart even when no one
used 2; other scores use the sorted distinct values.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import polars as pl
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from essaybench.human.annotations import require_columns

# scikit-learn and statsmodels are imported where κ is computed: every benchmark run imports
# this module (the report's spot-check trend reads human labels), and the two with pandas
# cost ~100 MiB of a run that has no human labels.

Weights = Literal["linear", "quadratic"] | None


@dataclass(frozen=True)
class Correlation:
    """A rank correlation with its two-sided p-value; NaN when undefined (constant input)."""

    statistic: float
    p_value: float
    n: int


@dataclass(frozen=True)
class FleissKappa:
    kappa: float
    n_items: int  # items used
    n_raters: int  # raters per used item
    n_items_dropped: int  # items with another number of raters
    categories: tuple[str, ...]


@dataclass(frozen=True)
class RaterAgreement:
    n: int
    exact: float
    within_one: float
    kappa: float  # unweighted
    kappa_linear: float
    kappa_quadratic: float
    spearman: Correlation
    kendall: Correlation


def _pair(a: ArrayLike, b: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError("two 1-D score vectors of equal length needed, "
                         f"got {x.shape} and {y.shape}")
    if x.size == 0:
        raise ValueError("no paired scores")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("scores must be finite (drop missing pairs first)")
    return x, y


def spearman(a: ArrayLike, b: ArrayLike) -> Correlation:
    x, y = _pair(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input → NaN, reported as such
        res = stats.spearmanr(x, y)
    return Correlation(float(res.statistic), float(res.pvalue), int(x.size))


def kendall(a: ArrayLike, b: ArrayLike) -> Correlation:
    """Kendall's τ-b (ties corrected)."""
    x, y = _pair(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.kendalltau(x, y)
    return Correlation(float(res.statistic), float(res.pvalue), int(x.size))


def exact_agreement(a: ArrayLike, b: ArrayLike) -> float:
    x, y = _pair(a, b)
    return float(np.mean(x == y))


def within_one(a: ArrayLike, b: ArrayLike, tolerance: float = 1.0) -> float:
    """Share of items whose two scores differ by at most ``tolerance``."""
    x, y = _pair(a, b)
    return float(np.mean(np.abs(x - y) <= tolerance))


def _categories(x: NDArray[np.float64], y: NDArray[np.float64]) -> NDArray[np.float64]:
    both = np.concatenate([x, y])
    if np.all(both == np.round(both)):
        return np.arange(both.min(), both.max() + 1.0)
    return np.unique(both)


def weighted_kappa(a: ArrayLike, b: ArrayLike, weights: Weights = "linear") -> float:
    """Cohen's κ (unweighted when ``weights`` is None); NaN when only one category occurs."""
    from sklearn.metrics import cohen_kappa_score

    x, y = _pair(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = cohen_kappa_score(x, y, labels=_categories(x, y), weights=weights)
    return float(value)


def rater_agreement(a: ArrayLike, b: ArrayLike) -> RaterAgreement:
    x, y = _pair(a, b)
    return RaterAgreement(
        n=int(x.size), exact=exact_agreement(x, y), within_one=within_one(x, y),
        kappa=weighted_kappa(x, y, None), kappa_linear=weighted_kappa(x, y, "linear"),
        kappa_quadratic=weighted_kappa(x, y, "quadratic"),
        spearman=spearman(x, y), kendall=kendall(x, y))


def agreement_row(label: str, agreement: RaterAgreement) -> dict[str, object]:
    return {"group": label, "n": agreement.n, "exact": agreement.exact,
            "within_one": agreement.within_one, "kappa": agreement.kappa,
            "kappa_linear": agreement.kappa_linear,
            "kappa_quadratic": agreement.kappa_quadratic,
            "spearman": agreement.spearman.statistic, "spearman_p": agreement.spearman.p_value,
            "kendall": agreement.kendall.statistic, "kendall_p": agreement.kendall.p_value}


def agreement_table(df: pl.DataFrame, a: str, b: str, *, by: str | None = None,
                    overall: str = "overall") -> pl.DataFrame:
    """:func:`rater_agreement` of columns ``a`` and ``b`` per ``by`` group, then overall.

    Rows where either score is null are left out.
    """
    require_columns(df, [a, b] + ([by] if by else []), "agreement_table")
    both = df.filter(pl.col(a).is_not_null() & pl.col(b).is_not_null())
    rows = []
    if by is not None:
        for (key,), group in sorted(both.group_by(by), key=lambda kv: str(kv[0][0])):
            rows.append(agreement_row(str(key), rater_agreement(group[a], group[b])))
    rows.append(agreement_row(overall, rater_agreement(both[a], both[b])))
    return pl.DataFrame(rows)


def fleiss_kappa(labels: Sequence[Sequence[Hashable]]) -> FleissKappa:
    """Fleiss' κ of a complete (n_items, n_raters) label matrix; raters are exchangeable."""
    rows = [list(map(str, r)) for r in labels]
    if not rows or len({len(r) for r in rows}) != 1 or len(rows[0]) < 2:
        raise ValueError("fleiss_kappa needs items × raters labels, the same number (≥ 2) "
                         "of raters per item")
    from statsmodels.stats.inter_rater import aggregate_raters
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

    table, categories = aggregate_raters(np.asarray(rows, dtype=object))
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore")
        kappa = float(sm_fleiss_kappa(table, method="fleiss"))
    return FleissKappa(kappa=kappa, n_items=len(rows), n_raters=len(rows[0]),
                       n_items_dropped=0, categories=tuple(str(c) for c in categories))


def fleiss_kappa_long(df: pl.DataFrame, *, items: Sequence[str], label: str) -> FleissKappa:
    """Fleiss' κ from long rows (one per item × rater).

    Uses the items that have the most common number of raters (≥ 2); the others
    are counted in ``n_items_dropped``.
    """
    require_columns(df, [*items, label], "fleiss_kappa_long")
    grouped = (df.filter(pl.col(label).is_not_null())
               .group_by(list(items)).agg(pl.col(label).cast(pl.Utf8).sort().alias("labels")))
    counts = grouped["labels"].list.len()
    eligible = counts.filter(counts >= 2)
    if eligible.is_empty():
        raise ValueError("fleiss_kappa_long: no item has two or more raters")
    modal = int(eligible.mode().max())  # type: ignore[arg-type]
    used = grouped.filter(counts == modal)
    result = fleiss_kappa(used["labels"].to_list())
    return FleissKappa(kappa=result.kappa, n_items=result.n_items, n_raters=modal,
                       n_items_dropped=grouped.height - used.height,
                       categories=result.categories)


def annotator_pairs(df: pl.DataFrame, *, items: Sequence[str] = ("prompt_id", "model"),
                    score: str = "score", annotator: str = "annotator") -> pl.DataFrame:
    """:func:`rater_agreement` for every pair of annotators, over the items both scored.

    For absolute annotations with several annotators; one row per pair, the
    ``group`` column reading ``"a vs b"`` (alphabetical).
    """
    require_columns(df, [*items, score, annotator], "annotator_pairs")
    scored = df.filter(pl.col(score).is_not_null()).select(*items, annotator, score)
    both = scored.join(scored, on=list(items), suffix="_2").filter(
        pl.col(annotator) < pl.col(f"{annotator}_2"))
    rows = []
    for (first, second), group in sorted(both.group_by(annotator, f"{annotator}_2"),
                                         key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        rows.append(agreement_row(f"{first} vs {second}",
                                  rater_agreement(group[score], group[f"{score}_2"])))
    if not rows:
        raise ValueError("annotator_pairs: no item was scored by two annotators")
    return pl.DataFrame(rows)
