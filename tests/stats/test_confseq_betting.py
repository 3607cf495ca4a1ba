"""Hedged-capital confidence sequences: against a scalar transcription of Waudby-Smith &
Ramdas (2024) Theorem 3 with predictable plug-in bets, and by simulation (time-uniform
coverage on skewed bounded data, optional stopping with equal means)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from essaybench.stats.confseq import unit_confseq
from essaybench.stats.confseq_betting import (
    betting_difference_confseq,
    betting_mean_confseq,
    betting_unit_confseq,
)
from tests.stats.test_confseq import SKEWED_MEAN, skewed


def slow_hedged(xs: list[float], alpha: float, grid: int, c: float = 0.5,
                theta: float = 0.5, horizon: int | None = None) -> list[tuple[float, float]]:
    """One stream: wealth of every candidate mean, step by step; bounds after each."""
    cands = [k / (grid - 1) for k in range(1, grid - 1)]
    up = [1.0] * len(cands)
    down = [1.0] * len(cands)
    out_of = [False] * len(cands)
    var_prev, sq, total, t = 0.25, 0.0, 0.0, 0
    lo, hi = 0.0, 1.0
    out = []
    for x in xs:
        if math.isnan(x):
            out.append((lo, hi))
            continue
        t += 1
        scale = t * math.log(1 + t) if horizon is None else horizon
        bet = math.sqrt(2 * math.log(2 / alpha) / (var_prev * scale))
        for k, m in enumerate(cands):
            up[k] *= 1 + min(bet, c / m) * (x - m)
            down[k] *= 1 - min(bet, c / (1 - m)) * (x - m)
            if max(theta * up[k], (1 - theta) * down[k]) >= 1 / alpha:
                out_of[k] = True
        total += x
        mu = (0.5 + total) / (t + 1)
        sq += (x - mu) ** 2
        var_prev = (0.25 + sq) / (t + 1)
        kept = [k for k in range(len(cands)) if not out_of[k]]
        if kept:
            lo = cands[kept[0] - 1] if kept[0] > 0 else 0.0
            hi = cands[kept[-1] + 1] if kept[-1] < len(cands) - 1 else 1.0
        out.append((lo, hi))
    return out


def test_matches_slow_hedged_capital() -> None:
    rng = np.random.default_rng(21)
    x = skewed(rng, (50, 3))
    x[rng.random(x.shape) < 0.1] = np.nan
    res = betting_unit_confseq(x, alpha=0.05, grid=101)
    for k in range(3):
        ref = np.array(slow_hedged(x[:, k].tolist(), 0.05, 101))
        np.testing.assert_allclose(res.lo[:, k], ref[:, 0], atol=1e-12)
        np.testing.assert_allclose(res.hi[:, k], ref[:, 1], atol=1e-12)


def test_time_uniform_coverage_and_tighter_than_eb() -> None:
    rng = np.random.default_rng(22)
    x = skewed(rng, (300, 2000))
    res = betting_unit_confseq(x, alpha=0.05, grid=201)
    covered = ((res.lo <= SKEWED_MEAN) & (res.hi >= SKEWED_MEAN)).all(axis=0)
    assert covered.mean() >= 0.95
    eb = unit_confseq(x, alpha=0.05)
    assert np.median((res.hi - res.lo)[-1]) < np.median((eb.hi - eb.lo)[-1])
    assert (np.diff(res.hi - res.lo, axis=0) <= 1e-12).all()  # intersected over time


def test_equal_means_rarely_separated_under_optional_stopping() -> None:
    rng = np.random.default_rng(23)
    prompt = rng.normal(0, 12, size=(250, 2000))
    a = np.clip(70 + prompt + rng.normal(0, 6, size=prompt.shape), 0, 100)
    b = np.clip(70 + prompt + rng.normal(0, 6, size=prompt.shape), 0, 100)
    res = betting_difference_confseq(a, b, alpha=0.05, grid=201)
    assert ((res.lo > 0) | (res.hi < 0)).any(axis=0).mean() <= 0.05
    shifted = betting_difference_confseq(a, np.clip(b - 8, 0, 100), alpha=0.05, grid=201)
    assert (shifted.lo[-1] > 0).mean() > 0.9  # and it does separate a real difference


def test_scales_and_validates() -> None:
    one = betting_mean_confseq([60.0, 70.0, 80.0], alpha=0.1, lower=0, upper=100, grid=201)
    assert 0.0 <= one.lo[-1] < 70.0 < one.hi[-1] <= 100.0
    assert one.n.tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match="grid"):
        betting_unit_confseq([0.5], alpha=0.1, grid=2)
    with pytest.raises(ValueError, match="alpha"):
        betting_unit_confseq([0.5], alpha=1.5)
    with pytest.raises(ValueError, match=r"\[0.0, 100.0\]"):
        betting_mean_confseq([101.0], alpha=0.1)


@pytest.mark.parametrize(("horizon", "c"), [(40, 0.5), (25, 0.9), (None, 0.8)])
def test_tuned_bets_match_slow_hedged_capital(horizon: int | None, c: float) -> None:
    """Bets tuned to a horizon, λ_t = √(2 log(2/α) / (σ̂²_{t−1} · horizon)), and a larger
    cap c: the same scalar walk with those bets."""
    rng = np.random.default_rng(24)
    x = skewed(rng, (60, 2))
    x[rng.random(x.shape) < 0.1] = np.nan
    res = betting_unit_confseq(x, alpha=0.1, grid=101, horizon=horizon, truncation=c)
    for k in range(2):
        ref = np.array(slow_hedged(x[:, k].tolist(), 0.1, 101, c=c, horizon=horizon))
        np.testing.assert_allclose(res.lo[:, k], ref[:, 0], atol=1e-12)
        np.testing.assert_allclose(res.hi[:, k], ref[:, 1], atol=1e-12)
    with pytest.raises(ValueError, match="horizon"):
        betting_unit_confseq([0.5], alpha=0.1, horizon=0)


def off_task_differences(rng: np.random.Generator, shape: tuple[int, int],
                         shift: float = 0.0) -> np.ndarray:
    """Paired differences of two 0–100 scores like the benchmark's: a shared prompt level,
    judge noise, 9% off-task essays scoring about 35 (the heavy lower tail)."""
    level = rng.uniform(45, 93, size=shape)
    a = level + shift + rng.normal(0, 4, size=shape)
    b = level + rng.normal(0, 4, size=shape)
    a = np.where(rng.random(shape) < 0.09, rng.normal(35, 5, size=shape), a)
    b = np.where(rng.random(shape) < 0.09, rng.normal(35, 5, size=shape), b)
    return np.asarray(np.clip(a, 10, 100) - np.clip(b, 10, 100))


def test_tuned_bets_cover_under_optional_stopping_and_are_tighter_there() -> None:
    """Time-uniform coverage of the tuned form (horizon 100, c 0.9) on heavy-tailed paired
    differences whose true mean is 0 by symmetry, and narrower than the anytime schedule
    near its horizon."""
    rng = np.random.default_rng(25)
    d = off_task_differences(rng, (200, 600))
    tuned = betting_mean_confseq(d, alpha=0.05, lower=-100, upper=100, grid=201,
                                 horizon=100, truncation=0.9)
    missed = ((tuned.lo > 0) | (tuned.hi < 0)).any(axis=0)  # at any of the 200 steps
    assert missed.mean() <= 0.05
    anytime = betting_mean_confseq(d, alpha=0.05, lower=-100, upper=100, grid=201)
    width = tuned.hi - tuned.lo
    assert np.median(width[99]) < 0.85 * np.median((anytime.hi - anytime.lo)[99])
    moved = betting_mean_confseq(off_task_differences(rng, (200, 200), shift=8.0),
                                 alpha=0.05, lower=-100, upper=100, grid=201, horizon=100,
                                 truncation=0.9)
    assert (moved.lo[-1] > 0).mean() > 0.9  # and it separates an 8-point difference
