"""t-intervals on prompt clusters for ratio means and their paired differences.

Why this and not a bootstrap: ``benchmarks/ci_coverage.py`` measures coverage on a
realistic simulator (discrete 1–10 sub-scores, weighted and bounded 10–100 scores
bunched near a ceiling, unequal variances across models). At the cell sizes of Table 5
the percentile prompt bootstrap and BCa under-cover (≈ 91–92% at 15 prompts): their
variance is the plug-in one (a factor (n−1)/n too small) and they use normal rather
than t quantiles. The cluster t-interval below covers 94–96% at 15, 30, 60 and 150
prompts, for cell means and for paired differences alike; the studentized bootstrap does
as well but costs replicates and a seed for no gain in coverage.

Estimator. Column k holds, per prompt p, the sum s_pk and the count c_pk of its ok
scores. The mean is the pooled R_k = Σ_p s_pk / Σ_p c_pk (what Table 5 prints). Its
variance is the linearised (delta-method) cluster variance with prompts as clusters:
z_pk = (s_pk − R_k·c_pk) / Σ_p c_pk, var = n/(n−1)·Σ_p z_pk², over the n prompts with
at least one ok score in the column; the bounds are R_k ± t_{n−1, 1−α/2}·√var. With one
score per prompt this is exactly the textbook one-sample t-interval.

Paired differences R_a − R_b use z_pa − z_pb on the same prompts (n = prompts with an ok
score in either column), so the prompt effect common to both models cancels — the same
pairing the joint prompt bootstrap gave; with one score per prompt in both columns it
is exactly the paired t-interval.

No interval where it cannot be honest: fewer than :data:`MIN_PROMPTS` prompts (the
simulation's threshold, see the benchmark; for a difference, on either side), or, for a
cell mean, no spread at all across prompts (every prompt gives the same value: a
zero-width interval would claim certainty). Such items get NaN bounds and a note saying
why. A paired difference without spread is different: every one of its ≥ MIN_PROMPTS
prompts shows the same difference d, so the data decide it — it gets the degenerate
interval [d, d] and the note :data:`NOTE_CONSTANT_DIFF` (d ≠ 0 is a decided difference,
d = 0 an exact tie).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from essaybench.stats.bootstrap import check_level

FloatArray = NDArray[np.float64]

# Below this many prompts no interval is printed. Chosen by `benchmarks/ci_coverage.py
# --threshold` (2,000 realistic cells per size): coverage does not set it — the t-interval
# covers ≈ 94% overall at every size from 2 prompts on (the model bunched at the ceiling
# 91–93.5%) — but below 7 prompts more than 5% of the intervals reach past the 10–100
# score scale (77% at 2 prompts, 21% at 5, 4% at 7): they say less than the scale itself.
MIN_PROMPTS = 7
NOTE_NO_SCORE = "no ok score"
NOTE_TOO_FEW = f"n too small (< {MIN_PROMPTS} prompts)"
NOTE_NO_SPREAD = "no spread across prompts"
NOTE_CONSTANT_DIFF = "the same difference on every prompt"


@dataclass(frozen=True)
class ClusterT:
    """Per item (column, or pair of columns): estimate, bounds, standard error, prompts
    and a note (empty string when there is an interval)."""

    estimate: FloatArray
    lo: FloatArray
    hi: FloatArray
    se: FloatArray
    n_prompts: NDArray[np.int64]
    note: list[str]
    level: float


def _check(sums: np.ndarray, counts: np.ndarray) -> tuple[FloatArray, FloatArray]:
    num = np.asarray(sums, dtype=np.float64)
    den = np.asarray(counts, dtype=np.float64)
    if num.ndim != 2 or num.shape != den.shape:
        raise ValueError(f"sums and counts must be 2-D of one shape, got {num.shape} and "
                         f"{den.shape}")
    if not (np.isfinite(num).all() and np.isfinite(den).all()) or (den < 0).any():
        raise ValueError("sums must be finite and counts finite and non-negative")
    return num, den


def _influence(num: FloatArray, den: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Pooled means (NaN without data) and per-prompt influences z (n_prompts, n_items)."""
    total = den.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(total > 0, num.sum(axis=0) / total, np.nan)
        z = np.where(total > 0, (num - np.nan_to_num(mean) * den) / total, 0.0)
    return np.asarray(mean, dtype=np.float64), np.asarray(z, dtype=np.float64)


def _bounds(estimate: FloatArray, z: FloatArray, n: NDArray[np.int64],
            has_data: NDArray[np.bool_], enough: NDArray[np.bool_], level: float,
            min_prompts: int) -> ClusterT:
    n_f = n.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        var = np.where(n > 1, n_f / (n_f - 1.0) * (z * z).sum(axis=0), np.nan)
    se = np.sqrt(var)
    # Relative to the scale of the data: float rounding of identical values is not spread.
    spread = se > 1e-12 * np.maximum(1.0, np.abs(np.nan_to_num(estimate)))
    enough = has_data & enough
    ok = enough & spread
    q = stats.t.ppf(0.5 + level / 2.0, np.maximum(n_f - 1.0, 1.0))
    lo = np.where(ok, estimate - q * se, np.nan)
    hi = np.where(ok, estimate + q * se, np.nan)
    too_few = f"n too small (< {min_prompts} prompts)"
    note = [NOTE_NO_SCORE if not d else too_few if not e else NOTE_NO_SPREAD if not s else ""
            for d, e, s in zip(has_data.tolist(), enough.tolist(), spread.tolist(),
                               strict=True)]
    return ClusterT(estimate=estimate, lo=lo, hi=hi, se=np.where(ok, se, np.nan),
                    n_prompts=n, note=note, level=level)


def cluster_t_means(sums: np.ndarray, counts: np.ndarray, *, level: float = 0.95,
                    min_prompts: int = MIN_PROMPTS) -> ClusterT:
    """t-interval of each column's pooled mean Σ sums / Σ counts, prompts (rows) as
    clusters. sums, counts: (n_prompts, n_items); count 0 = no ok score on that prompt."""
    num, den = _check(sums, counts)
    level = check_level(level)
    mean, z = _influence(num, den)
    n = (den > 0).sum(axis=0).astype(np.int64)
    return _bounds(mean, z, n, n > 0, n >= min_prompts, level, min_prompts)


def cluster_t_differences(sums: np.ndarray, counts: np.ndarray, first: np.ndarray,
                          second: np.ndarray, *, level: float = 0.95,
                          min_prompts: int = MIN_PROMPTS) -> ClusterT:
    """Paired t-interval of mean[first[k]] − mean[second[k]] for every k, same prompts."""
    num, den = _check(sums, counts)
    level = check_level(level)
    a = np.asarray(first, dtype=np.intp)
    b = np.asarray(second, dtype=np.intp)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("first and second must be 1-D index arrays of one length")
    mean, z = _influence(num, den)
    present = den > 0
    n = (present[:, a] | present[:, b]).sum(axis=0).astype(np.int64)
    per_item = present.sum(axis=0)
    # Each side needs its own prompts: a model seen on one prompt adds no variance term,
    # so a difference to it would look far more certain than it is.
    fewest = np.minimum(per_item[a], per_item[b])
    res = _bounds(mean[a] - mean[b], z[:, a] - z[:, b], n, fewest > 0,
                  fewest >= min_prompts, level, min_prompts)
    # No spread in a difference: every prompt shows the same d, which decides it.
    constant = np.array([note == NOTE_NO_SPREAD for note in res.note], dtype=bool)
    return ClusterT(estimate=res.estimate, lo=np.where(constant, res.estimate, res.lo),
                    hi=np.where(constant, res.estimate, res.hi),
                    se=np.where(constant, 0.0, res.se), n_prompts=res.n_prompts,
                    note=[NOTE_CONSTANT_DIFF if c else note
                          for c, note in zip(constant.tolist(), res.note, strict=True)],
                    level=res.level)


def cluster_t_contrasts(sums: np.ndarray, counts: np.ndarray, weights: np.ndarray, *,
                        level: float = 0.95, min_prompts: int = MIN_PROMPTS) -> ClusterT:
    """t-interval of each linear combination Σ_k w_kj·mean_k (column j of ``weights``,
    shape (n_items, n_out)) of the pooled column means, prompts as clusters: influences
    z @ w, so every mean it combines stays paired by prompt. A combination needs
    ``min_prompts`` prompts in each column it uses; without spread it has no interval
    (NaN bounds and a note), as a cell mean."""
    num, den = _check(sums, counts)
    level = check_level(level)
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 2 or w.shape[0] != num.shape[1]:
        raise ValueError(f"weights must be (n_items, n_out) with n_items = {num.shape[1]}, "
                         f"got {w.shape}")
    mean, z = _influence(num, den)
    used = w != 0.0
    present = den > 0
    n = (present[:, :, None] & used[None, :, :]).any(axis=1).sum(axis=0).astype(np.int64)
    per_item = present.sum(axis=0)
    fewest = np.array([per_item[u].min() if u.any() else 0 for u in used.T], dtype=np.int64)
    estimate = np.where(used, np.nan_to_num(mean)[:, None] * w, 0.0).sum(axis=0)
    return _bounds(np.where(fewest > 0, estimate, np.nan), z @ w, n, fewest > 0,
                   fewest >= min_prompts, level, min_prompts)
