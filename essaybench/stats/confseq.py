"""Anytime-valid confidence sequences for the mean of bounded observations.

Why not the ordinary interval: a 95% interval looked at after every round of an adaptive
run and acted on the first time it excludes 0 claims false differences far more often
than 5% (optional stopping). A confidence sequence (CS) is a sequence of intervals C_t
with P(μ ∈ C_t for every t at once) ≥ 1 − α, so the run may stop at any data-dependent
time, and a decision read off it keeps its error rate.

Construction: the predictable plug-in empirical-Bernstein CS (PrPl-EB) of Waudby-Smith &
Ramdas, "Estimating means of bounded random variables by betting", JRSS-B 86(1), 2024
(arXiv 2010.09686, Theorem 2 and eqs. 13–15); with a finite population sampled without
replacement, the form of Waudby-Smith & Ramdas, "Confidence sequences for sampling
without replacement", NeurIPS 2020 (Theorem 4). For x_i ∈ [0, 1] and two-sided level α:

    μ̂_t  = (1/2 + Σ_{i≤t} x_i) / (t + 1),          μ̂_0 = 1/2
    σ̂²_t = (1/4 + Σ_{i≤t} (x_i − μ̂_i)²) / (t + 1),  σ̂²_0 = 1/4
    λ_t  = min(√(2 log(2/α) / (σ̂²_{t−1} · t · log(1 + t))), c)      (c = 1/2)
    v_t  = 4 (x_t − μ̂_{t−1})²,   ψ_E(λ) = (−log(1 − λ) − λ) / 4
    Z_t  = S_{t−1} / (N − t + 1),  W_t = (t − 1) / (N − t + 1)   (0, 0 without N)
    C_t  = Σ λ_i (x_i + Z_i) / Σ λ_i (1 + W_i)  ±  (log(2/α) + Σ v_i ψ_E(λ_i)) / Σ λ_i (1 + W_i)

clipped to [0, 1] and, by default, intersected over time (still a CS, and decisions
never flip back). The betting form (:mod:`essaybench.stats.confseq_betting`) is tighter
when the spread is small against the bounds; this one is closed-form and fast.
Observations on [lower, upper] are rescaled to [0, 1] and back; a paired difference of
two 0–100 scores lives on [−100, 100].

What the guarantee needs: given the past, each observation has the same mean μ (i.i.d.
draws, or a uniformly random order of an i.i.d. sample of prompts: its prefix is again
i.i.d.), or, with ``population=N``, a uniformly random order of a fixed set of N items
(then μ is that set's mean). Clustered data: the prompt is the unit — several essays or
judges of one prompt are not independent, so average them per prompt first
(:func:`cluster_means`) and feed one observation per prompt. NaN marks a missing
observation (e.g. a failed judgment, missing completely at random): the stream skips it
and its interval stays as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

DEFAULT_TRUNCATION = 0.5


@dataclass(frozen=True)
class ConfSeq:
    """Bounds on the observation scale after each step: (n_steps,) or (n_steps,
    n_streams); ``n`` counts the observations each bound rests on."""

    lo: FloatArray
    hi: FloatArray
    n: NDArray[np.int64]
    alpha: float


def check_alpha(alpha: float) -> float:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return float(alpha)


def to_unit(x: ArrayLike, lower: float, upper: float) -> FloatArray:
    if not upper > lower:
        raise ValueError(f"upper must exceed lower, got [{lower}, {upper}]")
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim not in (1, 2):
        raise ValueError(f"x must be 1-D or 2-D (time along axis 0), got shape {arr.shape}")
    seen = arr[~np.isnan(arr)]
    if seen.size and (seen.min() < lower or seen.max() > upper or not np.isfinite(seen).all()):
        raise ValueError(f"observations must lie in [{lower}, {upper}]")
    return (arr - lower) / (upper - lower)


def _shift(a: FloatArray, first: float) -> FloatArray:
    """a at the previous step (``first`` before the first one), along axis 0."""
    out = np.empty_like(a)
    out[0] = first
    out[1:] = a[:-1]
    return out


def plug_in_bets(xs: FloatArray, seen: NDArray[np.bool_], alpha: float,
                 cap: float, horizon: int | None = None
                 ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The predictable plug-in bets λ_t (capped, 0 on missing steps), the count t of
    observations so far and μ̂_{t−1}, per step and stream (eqs. 13–14). ``horizon``: bets
    tuned for that sample size, λ_t = √(2 log(2/α) / (σ̂²_{t−1} · horizon)) (the paper's
    plug-in for a fixed sample size) instead of t·log(1 + t); any predictable bet keeps
    the guarantee, this one is tightest near ``horizon``."""
    t = np.cumsum(seen, axis=0).astype(np.float64)  # observations so far, per stream
    mu = (0.5 + np.cumsum(xs, axis=0)) / (t + 1.0)
    sq = np.where(seen, (xs - mu) ** 2, 0.0)
    var = (0.25 + np.cumsum(sq, axis=0)) / (t + 1.0)
    # Predictable: the step's own observation never enters its bet. On a missing step
    # t is unchanged, so the "previous" values are the ones of the last observation.
    mu_prev = np.where(seen, _shift(mu, 0.5), mu)
    var_prev = np.where(seen, _shift(var, 0.25), var)
    scale = t * np.log1p(t) if horizon is None else np.full_like(t, float(horizon))
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.sqrt(2.0 * np.log(2.0 / alpha) / (var_prev * scale))
    lam = np.where(seen, np.minimum(np.nan_to_num(lam, nan=0.0, posinf=cap), cap), 0.0)
    return lam, t, mu_prev


def unit_confseq(x: ArrayLike, *, alpha: float, truncation: float = DEFAULT_TRUNCATION,
                 population: int | None = None,
                 running_intersection: bool = True) -> ConfSeq:
    """PrPl-EB CS (see the module docstring) for observations in [0, 1], NaN = missing;
    ``population``: sampling without replacement from that many items."""
    alpha = check_alpha(alpha)
    if not 0.0 < truncation < 1.0:
        raise ValueError(f"truncation must be in (0, 1), got {truncation}")
    u = np.asarray(x, dtype=np.float64)
    seen = ~np.isnan(u)
    xs = np.where(seen, u, 0.0)
    lam, t, mu_prev = plug_in_bets(xs, seen, alpha, truncation)
    if population is not None and (t.size and population < t.max()):
        raise ValueError(f"population {population} is smaller than the {int(t.max())} "
                         "observations")
    s = np.cumsum(xs, axis=0)
    t_prev = t - seen
    log_term = np.log(2.0 / alpha)
    v = 4.0 * (xs - mu_prev) ** 2
    psi = (-np.log1p(-lam) - lam) / 4.0
    if population is None:
        z = np.zeros_like(xs)
        w = np.zeros_like(xs)
    else:
        left = np.where(seen, population - t_prev, 1.0)  # items not yet drawn
        z = np.where(seen, (s - xs) / left, 0.0)
        w = np.where(seen, t_prev / left, 0.0)
    den = np.cumsum(lam * (1.0 + w), axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        centre = np.cumsum(lam * (xs + z), axis=0) / den
        margin = (log_term + np.cumsum(np.where(seen, v * psi, 0.0), axis=0)) / den
    started = den > 0
    lo = np.where(started, np.clip(centre - margin, 0.0, 1.0), 0.0)
    hi = np.where(started, np.clip(centre + margin, 0.0, 1.0), 1.0)
    if running_intersection:
        lo = np.maximum.accumulate(lo, axis=0)
        hi = np.minimum.accumulate(hi, axis=0)
    return ConfSeq(lo=lo, hi=np.maximum(hi, lo), n=t.astype(np.int64), alpha=alpha)


def mean_confseq(x: ArrayLike, *, alpha: float, lower: float = 0.0, upper: float = 100.0,
                 truncation: float = DEFAULT_TRUNCATION, population: int | None = None,
                 running_intersection: bool = True) -> ConfSeq:
    """CS for the mean of observations bounded in [lower, upper] (default: 0–100 scores),
    one per prompt, time along axis 0; several streams side by side as columns."""
    res = unit_confseq(to_unit(x, lower, upper), alpha=alpha, truncation=truncation,
                       population=population, running_intersection=running_intersection)
    span = upper - lower
    return ConfSeq(lo=lower + span * res.lo, hi=lower + span * res.hi, n=res.n,
                   alpha=res.alpha)


def difference_confseq(a: ArrayLike, b: ArrayLike, *, alpha: float, lower: float = 0.0,
                       upper: float = 100.0, truncation: float = DEFAULT_TRUNCATION,
                       population: int | None = None,
                       running_intersection: bool = True) -> ConfSeq:
    """CS for the mean paired difference a − b of scores on [lower, upper], paired by
    prompt (row); the differences live on [−(upper − lower), upper − lower]."""
    span = upper - lower
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return mean_confseq(d, alpha=alpha, lower=-span, upper=span, truncation=truncation,
                        population=population, running_intersection=running_intersection)


def cluster_means(values: ArrayLike, clusters: ArrayLike,
                  order: ArrayLike) -> FloatArray:
    """Per-cluster means of ``values`` (NaN values ignored), in the given cluster order:
    one observation per prompt (NaN for a prompt without any value). Columns of a 2-D
    ``values`` are averaged separately."""
    vals = np.asarray(values, dtype=np.float64)
    keys = np.asarray(clusters)
    wanted = np.asarray(order)
    if vals.shape[0] != keys.shape[0]:
        raise ValueError("values and clusters must have one row per observation")
    uniq, inverse = np.unique(keys, return_inverse=True)
    flat = vals.reshape(vals.shape[0], -1)
    ok = ~np.isnan(flat)
    sums = np.zeros((uniq.size, flat.shape[1]))
    counts = np.zeros_like(sums)
    np.add.at(sums, inverse, np.where(ok, flat, 0.0))
    np.add.at(counts, inverse, ok)
    pos = np.searchsorted(uniq, wanted)
    known = (pos < uniq.size) & (uniq[np.minimum(pos, uniq.size - 1)] == wanted)
    if not known.all():
        raise ValueError(f"order names clusters without values: {wanted[~known][:3]}")
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums[pos] / counts[pos]
    return np.asarray(means.reshape((wanted.size, *vals.shape[1:])), dtype=np.float64)
