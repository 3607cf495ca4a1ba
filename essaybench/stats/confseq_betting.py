"""Betting confidence sequences ("hedged capital") for bounded means: tighter than the
empirical-Bernstein form of :mod:`essaybench.stats.confseq` when the spread is small
against the bounds — paired score differences: on a −100…100 scale, but a few points
apart — which is where adaptive sampling lives.

Construction: Waudby-Smith & Ramdas, "Estimating means of bounded random variables by
betting", JRSS-B 86(1), 2024 (arXiv 2010.09686), Theorem 3 with the predictable plug-in
bets of its Section 5.1 (also ``confseq.betting.hedged_cs``). For x_i ∈ [0, 1] and each
candidate mean m, two bettors wager against m:

    K⁺_t(m) = Π_{i≤t} (1 + λ⁺_i(m)(x_i − m)),  λ⁺_i(m) = min(λ̇_i, c/m)
    K⁻_t(m) = Π_{i≤t} (1 − λ⁻_i(m)(x_i − m)),  λ⁻_i(m) = min(λ̇_i, c/(1 − m))
    K_t(m)  = max(θ K⁺_t(m), (1 − θ) K⁻_t(m)),  θ = 1/2,  c = 1/2

with λ̇_i the predictable plug-in bet of the empirical-Bernstein sequence (its σ̂²_{i−1},
level log(2/α)). K_t(μ) is a nonnegative supermartingale started at 1 at the true mean
μ, so by Ville's inequality C_t = {m : K_s(m) < 1/α for all s ≤ t} holds μ at every t at
once with probability ≥ 1 − α. C_t is found on a grid of candidate means; the bounds
are widened to the next rejected grid point, so the grid can only make them looser.

Tuning, fixed before the data (any predictable bets keep the guarantee): ``horizon`` =
n bets λ̇_i = √(2 log(2/α) / (σ̂²_{i−1} · n)), the plug-in the paper uses for a fixed
sample size, instead of the anytime schedule's i·log(1 + i): the sequence is then
tightest near n prompts and looser far beyond; ``truncation`` c up to < 1 lets the bets
grow when the spread is small against the bounds (c/m stays below 1/m, so no wealth
reaches 0). On the benchmark's paired differences (heavy lower tail, sd ≈ 18 points on
−100…100) n = 364 and c = 0.9 narrow the median half-width at 360 prompts from 3.25
to 2.6 points (a fixed-n t-interval, invalid under optional stopping: 1.85); see
docs/benchmarks.md.

Same conditions as the empirical-Bernstein form: one observation per prompt (average a
prompt's essays and judges first), exchangeable order, NaN = skipped. No
without-replacement form here.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from essaybench.stats.confseq import (
    DEFAULT_TRUNCATION,
    ConfSeq,
    FloatArray,
    check_alpha,
    plug_in_bets,
    to_unit,
)

DEFAULT_GRID = 401  # candidate means: a step of 0.5 points on a −100…100 difference
# Steps handled at once, as (block, streams, grid) arrays of about this many cells: few
# streams run in blocks (less Python per step), many streams step by step (less memory).
_BLOCK_CELLS = 65_536


def betting_unit_confseq(x: ArrayLike, *, alpha: float, grid: int = DEFAULT_GRID,
                         truncation: float = DEFAULT_TRUNCATION,
                         theta: float = 0.5, horizon: int | None = None) -> ConfSeq:
    """Hedged-capital CS for observations in [0, 1] (time along axis 0, NaN = missing),
    intersected over time."""
    alpha = check_alpha(alpha)
    if not 0.0 < truncation < 1.0 or not 0.0 < theta < 1.0:
        raise ValueError("truncation and theta must be in (0, 1)")
    if grid < 3:
        raise ValueError("grid must hold at least 3 candidate means")
    u = np.asarray(x, dtype=np.float64)
    flat = u.reshape(u.shape[0], -1)
    seen = ~np.isnan(flat)
    xs = np.where(seen, flat, 0.0)
    if horizon is not None and horizon < 1:
        raise ValueError(f"horizon must be ≥ 1, got {horizon}")
    bets, t, _ = plug_in_bets(xs, seen, alpha, cap=np.inf, horizon=horizon)
    m = np.linspace(0.0, 1.0, grid)[1:-1]  # the open interval: 0 and 1 are edges
    cap_up = truncation / m
    cap_down = truncation / (1.0 - m)
    log_up = np.zeros((flat.shape[1], m.size))  # log K⁺ per stream and candidate
    log_down = np.zeros_like(log_up)
    rejected = np.zeros(log_up.shape, dtype=bool)  # at some step so far
    threshold = np.log(1.0 / alpha)
    log_theta, log_rest = np.log(theta), np.log(1.0 - theta)
    lo = np.zeros_like(xs)
    hi = np.ones_like(xs)
    inner = np.concatenate(([0.0], m, [1.0]))
    prev_lo, prev_hi = np.zeros(xs.shape[1]), np.ones(xs.shape[1])
    block = int(np.clip(_BLOCK_CELLS // max(1, log_up.size), 1, 32))
    for start in range(0, xs.shape[0], block):
        lam = bets[start:start + block, :, None]
        dev = xs[start:start + block, :, None] - m[None, None, :]
        up = log_up + np.cumsum(np.log1p(np.minimum(lam, cap_up) * dev), axis=0)
        down = log_down + np.cumsum(np.log1p(-np.minimum(lam, cap_down) * dev), axis=0)
        hit = np.maximum(log_theta + up, log_rest + down) >= threshold
        out = rejected | np.logical_or.accumulate(hit, axis=0)
        log_up, log_down, rejected = up[-1], down[-1], out[-1]
        # Widen to the neighbouring grid point: the CS edge lies between the last
        # rejected candidate and the first kept one (inner[0], inner[-1]: the edges).
        kept = np.pad(~out, ((0, 0), (0, 0), (1, 1)))
        any_kept = kept.any(axis=2)
        first = np.argmax(kept, axis=2)
        last = kept.shape[2] - 1 - np.argmax(kept[:, :, ::-1], axis=2)
        block_lo = np.where(any_kept, inner[np.maximum(first - 1, 0)], np.nan)
        block_hi = np.where(any_kept, inner[np.minimum(last + 1, inner.size - 1)], np.nan)
        for j in range(block_lo.shape[0]):  # an empty set (rare) keeps the last bounds
            prev_lo = np.where(np.isnan(block_lo[j]), prev_lo, block_lo[j])
            prev_hi = np.where(np.isnan(block_hi[j]), prev_hi, block_hi[j])
            lo[start + j], hi[start + j] = prev_lo, prev_hi
    return ConfSeq(lo=lo.reshape(u.shape), hi=hi.reshape(u.shape),
                   n=t.astype(np.int64).reshape(u.shape), alpha=alpha)


def betting_mean_confseq(x: ArrayLike, *, alpha: float, lower: float = 0.0,
                         upper: float = 100.0, grid: int = DEFAULT_GRID,
                         truncation: float = DEFAULT_TRUNCATION,
                         horizon: int | None = None) -> ConfSeq:
    """Hedged-capital CS for the mean of observations in [lower, upper] (0–100 scores by
    default), one per prompt, several streams as columns."""
    res = betting_unit_confseq(to_unit(x, lower, upper), alpha=alpha, grid=grid,
                               truncation=truncation, horizon=horizon)
    span = upper - lower
    return ConfSeq(lo=lower + span * res.lo, hi=lower + span * res.hi, n=res.n,
                   alpha=res.alpha)


def betting_difference_confseq(a: ArrayLike, b: ArrayLike, *, alpha: float,
                               lower: float = 0.0, upper: float = 100.0,
                               grid: int = DEFAULT_GRID,
                               truncation: float = DEFAULT_TRUNCATION,
                               horizon: int | None = None) -> ConfSeq:
    """Hedged-capital CS for the mean paired difference a − b of scores on [lower, upper];
    the differences live on [−(upper − lower), upper − lower]."""
    span = upper - lower
    d: FloatArray = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return betting_mean_confseq(d, alpha=alpha, lower=-span, upper=span, grid=grid,
                                truncation=truncation, horizon=horizon)
