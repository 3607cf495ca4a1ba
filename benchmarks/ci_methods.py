"""Candidate 95% intervals for ratio means and paired differences, compared by ci_coverage.

Every candidate takes a cell as essaybench holds it — per prompt (row) and model
(column) the sum and count of ok scores —, the index pairs (first, second) of the
differences and one prompt-resampling count matrix shared by the bootstrap candidates
(so they are compared on the same replicates; resampling is of prompts, jointly for all
models: paired), and returns (lo, hi) for the means and for the differences.

* ``cluster_t``: production (:mod:`essaybench.stats.cluster_t`), no resampling.
* ``percentile``: the prompt bootstrap's percentile bounds (production before issue 16).
* ``bca``: bias-corrected and accelerated percentile bounds, acceleration from the
  leave-one-prompt-out jackknife (Efron 1987).
* ``student``: studentized (bootstrap-t) bounds, each replicate studentized by its own
  linearised cluster standard error.
* ``johnson``: Johnson's (1978) skew-corrected t: the cluster-t interval shifted by
  γ̂·se/(6√n), γ̂ the skewness of the per-prompt influences (issue 25 item 8).
* ``hall``: Hall's (1992) cubic transformation of the t statistic, which removes its
  skewness, inverted at the t quantiles (as in Zhou & Dinh 2005), on the same influences.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from essaybench.stats.bootstrap import percentile_bounds
from essaybench.stats.cluster_t import cluster_t_differences, cluster_t_means

FloatArray = NDArray[np.float64]
Bounds = tuple[FloatArray, FloatArray]
# (sums, counts, first, second, resample counts (B, n_prompts), level) -> bounds
Method = Callable[[FloatArray, FloatArray, NDArray[np.intp], NDArray[np.intp], FloatArray,
                   float], tuple[Bounds, Bounds]]


def _ratio(weights: FloatArray, sums: FloatArray, counts: FloatArray) -> FloatArray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray((weights @ sums) / (weights @ counts), dtype=np.float64)


def cluster_t(sums: FloatArray, counts: FloatArray, first: NDArray[np.intp],
              second: NDArray[np.intp], w: FloatArray,
              level: float) -> tuple[Bounds, Bounds]:
    # min_prompts=2: the benchmark measures coverage wherever a t-interval exists.
    cells = cluster_t_means(sums, counts, level=level, min_prompts=2)
    diffs = cluster_t_differences(sums, counts, first, second, level=level, min_prompts=2)
    return (cells.lo, cells.hi), (diffs.lo, diffs.hi)


def percentile(sums: FloatArray, counts: FloatArray, first: NDArray[np.intp],
               second: NDArray[np.intp], w: FloatArray,
               level: float) -> tuple[Bounds, Bounds]:
    boot = _ratio(w, sums, counts)
    return (percentile_bounds(boot, level),
            percentile_bounds(boot[:, first] - boot[:, second], level))


def _bca_bounds(boot: FloatArray, estimate: FloatArray, jack: FloatArray,
                level: float) -> Bounds:
    """Column-wise BCa bounds from replicates (B, m), estimates (m,), jackknife (n, m)."""
    valid = ~np.isnan(boot)
    below = np.where(valid, boot < estimate, False).sum(axis=0)
    equal = np.where(valid, boot == estimate, False).sum(axis=0)
    share = (below + 0.5 * equal) / np.maximum(valid.sum(axis=0), 1)
    z0 = stats.norm.ppf(np.clip(share, 1e-6, 1 - 1e-6))
    dev = np.nanmean(jack, axis=0) - jack
    num = np.nansum(dev**3, axis=0)
    den = 6.0 * np.nansum(dev**2, axis=0) ** 1.5
    acc = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    # np.quantile's linear interpolation at a different level per column, vectorised:
    # NaN replicates sort last and are left out through each column's own count.
    ordered = np.sort(boot, axis=0)
    n_valid = valid.sum(axis=0)
    cols = np.arange(boot.shape[1])
    bounds = []
    for z in (stats.norm.ppf((1 - level) / 2), stats.norm.ppf((1 + level) / 2)):
        adj = stats.norm.cdf(z0 + (z0 + z) / (1 - acc * (z0 + z)))
        pos = adj * np.maximum(n_valid - 1, 0)
        below_i = np.floor(pos).astype(np.intp)
        above_i = np.minimum(below_i + 1, np.maximum(n_valid - 1, 0))
        frac = pos - below_i
        value = ordered[below_i, cols] + frac * (ordered[above_i, cols] - ordered[below_i, cols])
        bounds.append(np.where(n_valid > 0, value, np.nan))
    lo, hi = bounds[0], bounds[1]
    return lo, hi


def bca(sums: FloatArray, counts: FloatArray, first: NDArray[np.intp],
        second: NDArray[np.intp], w: FloatArray,
        level: float) -> tuple[Bounds, Bounds]:
    n = sums.shape[0]
    boot = _ratio(w, sums, counts)
    estimate = _ratio(np.ones((1, n)), sums, counts)[0]
    jack = _ratio(1.0 - np.eye(n), sums, counts)  # row p: every prompt but p
    return (_bca_bounds(boot, estimate, jack, level),
            _bca_bounds(boot[:, first] - boot[:, second], estimate[first] - estimate[second],
                        jack[:, first] - jack[:, second], level))


def student(sums: FloatArray, counts: FloatArray, first: NDArray[np.intp],
            second: NDArray[np.intp], w: FloatArray,
            level: float) -> tuple[Bounds, Bounds]:
    n = sums.shape[0]
    est = _ratio(np.ones((1, n)), sums, counts)[0]
    tot = counts.sum(axis=0)
    z = (sums - est * counts) / tot  # observed influences (n, m)
    se = np.sqrt(n / (n - 1) * (z * z).sum(axis=0))
    zd = z[:, first] - z[:, second]
    se_d = np.sqrt(n / (n - 1) * (zd * zd).sum(axis=0))
    r = _ratio(w, sums, counts)  # (B, m)
    c_star = w @ counts  # (B, m)
    # Replicate influences z*_p = (s_p − R*·c_p)/C*, weighted by how often p was drawn:
    # Σ_p w_p z*_pa z*_pb expands into weighted cross-moments of sums and counts, computed
    # for every (a, b) at once (m² columns; m = 8 models here).
    m = sums.shape[1]
    ii, jj = np.divmod(np.arange(m * m), m)
    ss, sc, cc = (w @ (x[:, ii] * y[:, jj]) for x, y in ((sums, sums), (sums, counts),
                                                        (counts, counts)))
    cs = sc.reshape(-1, m, m).transpose(0, 2, 1).reshape(-1, m * m)
    with np.errstate(invalid="ignore", divide="ignore"):
        cross = ((ss - r[:, jj] * sc - r[:, ii] * cs + r[:, ii] * r[:, jj] * cc)
                 / (c_star[:, ii] * c_star[:, jj]))

        def at(i: NDArray[np.intp], j: NDArray[np.intp]) -> FloatArray:
            return np.asarray(cross[:, i * m + j], dtype=np.float64)

        every = np.arange(m)
        se_star = np.sqrt(n / (n - 1) * at(every, every))
        var_d = at(first, first) + at(second, second) - 2.0 * at(first, second)
        se_d_star = np.sqrt(n / (n - 1) * np.maximum(var_d, 0.0))
        t_cell = (r - est) / se_star
        t_diff = ((r[:, first] - r[:, second]) - (est[first] - est[second])) / se_d_star
    t_cell[~np.isfinite(t_cell)] = np.nan
    t_diff[~np.isfinite(t_diff)] = np.nan
    q_lo, q_hi = percentile_bounds(t_cell, level)
    d_lo, d_hi = percentile_bounds(t_diff, level)
    diff = est[first] - est[second]
    return (est - q_hi * se, est - q_lo * se), (diff - d_hi * se_d, diff - d_lo * se_d)


def _influences(sums: FloatArray, counts: FloatArray, first: NDArray[np.intp],
                second: NDArray[np.intp]) -> tuple[FloatArray, FloatArray, FloatArray,
                                                   FloatArray, FloatArray, FloatArray]:
    """(estimates, influences, prompts) for the means and for the differences."""
    tot = counts.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        est = sums.sum(axis=0) / tot
        z = (sums - est * counts) / tot
    present = counts > 0
    n = present.sum(axis=0).astype(np.float64)
    n_d = (present[:, first] | present[:, second]).sum(axis=0).astype(np.float64)
    return est, z, n, est[first] - est[second], z[:, first] - z[:, second], n_d


def _skew_parts(z: FloatArray, n: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(cluster-t se, c = γ̂/√n) per column; γ̂ the skewness of the influences."""
    s2 = (z * z).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.sqrt(n / (n - 1.0) * s2)
        gamma = np.sqrt(n) * (z**3).sum(axis=0) / s2**1.5
        c = np.where(s2 > 0, gamma / np.sqrt(n), 0.0)
    return np.asarray(se, dtype=np.float64), np.asarray(c, dtype=np.float64)


def _hall(est: FloatArray, z: FloatArray, n: FloatArray, level: float) -> Bounds:
    se, c = _skew_parts(z, n)
    q = stats.t.ppf(0.5 + level / 2.0, np.maximum(n - 1.0, 1.0))

    def u_of(t: FloatArray) -> FloatArray:
        """Invert T(u) = ((1 + c·u/3)³ − 1)/c + c/6 (= u + c/6 when c = 0)."""
        small = np.abs(c) < 1e-12
        safe = np.where(small, 1.0, c)
        inv = 3.0 / safe * (np.cbrt(1.0 + safe * (t - safe / 6.0)) - 1.0)
        return np.asarray(np.where(small, t, inv), dtype=np.float64)

    return est - se * u_of(q), est - se * u_of(-q)


def _johnson(est: FloatArray, z: FloatArray, n: FloatArray, level: float) -> Bounds:
    se, c = _skew_parts(z, n)
    q = stats.t.ppf(0.5 + level / 2.0, np.maximum(n - 1.0, 1.0))
    centre = est + c * se / 6.0
    return centre - q * se, centre + q * se


def hall(sums: FloatArray, counts: FloatArray, first: NDArray[np.intp],
         second: NDArray[np.intp], w: FloatArray, level: float) -> tuple[Bounds, Bounds]:
    est, z, n, d, zd, n_d = _influences(sums, counts, first, second)
    return _hall(est, z, n, level), _hall(d, zd, n_d, level)


def johnson(sums: FloatArray, counts: FloatArray, first: NDArray[np.intp],
            second: NDArray[np.intp], w: FloatArray, level: float) -> tuple[Bounds, Bounds]:
    est, z, n, d, zd, n_d = _influences(sums, counts, first, second)
    return _johnson(est, z, n, level), _johnson(d, zd, n_d, level)


BOOTSTRAP = frozenset({"percentile", "bca", "student"})  # the ones that need replicates
CANDIDATES: dict[str, Method] = {"cluster_t": cluster_t, "percentile": percentile,
                                 "bca": bca, "student": student, "johnson": johnson,
                                 "hall": hall}
PRODUCTION = "cluster_t"
