"""Confidence sequences: the vectorised code against a slow, scalar transcription of the
published formulas (Waudby-Smith & Ramdas 2024 eqs. 13–15; 2020 Theorem 4 without
replacement), and time-uniform coverage by simulation under optional stopping.

(The ``confseq`` package would be the natural independent check, but its sdist needs a
C++ build that fails here — cmake error — so the reference is written out below.)"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from essaybench.stats.confseq import (
    cluster_means,
    difference_confseq,
    mean_confseq,
    unit_confseq,
)


def slow_prpl_eb(xs: list[float], alpha: float, c: float = 0.5,
                 n_pop: int | None = None) -> list[tuple[float, float]]:
    """One stream, one step at a time; NaN = skipped. Bounds after every step."""
    out: list[tuple[float, float]] = []
    seen: list[float] = []
    mus = [0.5]  # μ̂_0, μ̂_1, …
    var_prev = 0.25
    sq_sum = 0.0
    num = den = vpsi = 0.0
    lo, hi = 0.0, 1.0
    for x in xs:
        if math.isnan(x):
            out.append((lo, hi))
            continue
        t = len(seen) + 1
        lam = min(math.sqrt(2 * math.log(2 / alpha) / (var_prev * t * math.log(1 + t))), c)
        v = 4 * (x - mus[-1]) ** 2
        psi = (-math.log(1 - lam) - lam) / 4
        if n_pop is None:
            z = w = 0.0
        else:
            z = sum(seen) / (n_pop - t + 1)
            w = (t - 1) / (n_pop - t + 1)
        num += lam * (x + z)
        den += lam * (1 + w)
        vpsi += v * psi
        seen.append(x)
        mu_t = (0.5 + sum(seen)) / (t + 1)
        mus.append(mu_t)
        sq_sum += (x - mu_t) ** 2
        var_prev = (0.25 + sq_sum) / (t + 1)
        centre, margin = num / den, (math.log(2 / alpha) + vpsi) / den
        lo = max(lo, min(max(centre - margin, 0.0), 1.0))
        hi = min(hi, max(min(centre + margin, 1.0), 0.0))
        out.append((lo, max(hi, lo)))
    return out


def skewed(rng: np.random.Generator, size: tuple[int, ...]) -> np.ndarray:
    """Scores bunched under a ceiling with a heavy lower tail (mean 0.9·0.8+0.1·0.3)."""
    high = rng.beta(8.0, 2.0, size=size)
    low = rng.beta(3.0, 7.0, size=size)
    return np.where(rng.random(size) < 0.1, low, high)


SKEWED_MEAN = 0.9 * 0.8 + 0.1 * 0.3


@pytest.mark.parametrize("n_pop", [None, 60])
def test_matches_slow_formula_with_missing(n_pop: int | None) -> None:
    rng = np.random.default_rng(1)
    x = skewed(rng, (60, 4))
    x[rng.random(x.shape) < 0.1] = np.nan
    if n_pop is not None:  # a permutation of a fixed population: no gaps allowed there
        x = np.nan_to_num(x, nan=0.5)
    res = unit_confseq(x, alpha=0.1, population=n_pop)
    for k in range(x.shape[1]):
        ref = np.array(slow_prpl_eb(x[:, k].tolist(), 0.1, n_pop=n_pop))
        np.testing.assert_allclose(res.lo[:, k], ref[:, 0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(res.hi[:, k], ref[:, 1], rtol=0, atol=1e-12)
        assert res.n[-1, k] == np.count_nonzero(~np.isnan(x[:, k]))


def test_scaled_and_difference_forms() -> None:
    rng = np.random.default_rng(2)
    a, b = 100 * skewed(rng, (40,)), 100 * skewed(rng, (40,))
    ref = np.array(slow_prpl_eb(((a - b + 100) / 200).tolist(), 0.05))
    res = difference_confseq(a, b, alpha=0.05)
    np.testing.assert_allclose(res.lo, -100 + 200 * ref[:, 0], atol=1e-9)
    np.testing.assert_allclose(res.hi, -100 + 200 * ref[:, 1], atol=1e-9)
    one = mean_confseq(a, alpha=0.05)
    assert one.lo[0] == pytest.approx(0.0) and one.hi[0] == pytest.approx(100.0)
    assert (np.diff(one.hi - one.lo) <= 1e-12).all()  # running intersection


def test_time_uniform_coverage_under_optional_stopping() -> None:
    """2,000 skewed streams of 300 steps: the CS holds the mean at every step at once
    (so stopping at any step is covered), while a 95% t-interval checked at every step
    misses it far more often than 5% — the simulation can tell them apart."""
    rng = np.random.default_rng(3)
    x = skewed(rng, (300, 2000))
    res = unit_confseq(x, alpha=0.05)
    covered = ((res.lo <= SKEWED_MEAN) & (res.hi >= SKEWED_MEAN)).all(axis=0)
    assert covered.mean() >= 0.95
    t = np.arange(1, 301)[:, None]
    mean = np.cumsum(x, axis=0) / t
    sd = np.sqrt(np.maximum(np.cumsum(x**2, axis=0) / t - mean**2, 0) * t / np.maximum(t - 1, 1))
    q = stats.t.ppf(0.975, np.maximum(t - 1, 1))
    naive = (np.abs(mean - SKEWED_MEAN) <= q * sd / np.sqrt(t))[4:].all(axis=0)
    assert naive.mean() < 0.8


def test_without_replacement_covers_population_mean() -> None:
    rng = np.random.default_rng(4)
    population = 100 * skewed(rng, (150,))
    orders = np.argsort(rng.random((150, 2000)), axis=0)
    res = mean_confseq(population[orders], alpha=0.05, population=150)
    mu = population.mean()
    assert ((res.lo <= mu) & (mu <= res.hi)).all(axis=0).mean() >= 0.95
    # Knowing the population size pays: narrower than the i.i.d. form at the end.
    iid = mean_confseq(population[orders], alpha=0.05)
    assert ((res.hi - res.lo)[-1] < (iid.hi - iid.lo)[-1]).all()


def test_equal_means_rarely_separated() -> None:
    """Two models of one true mean: the paired CS excludes 0 at some step in ≤ 5%."""
    rng = np.random.default_rng(5)
    prompt = rng.normal(0, 12, size=(250, 2000))
    a = np.clip(70 + prompt + rng.normal(0, 6, size=prompt.shape), 0, 100)
    b = np.clip(70 + prompt + rng.normal(0, 6, size=prompt.shape), 0, 100)
    res = difference_confseq(a, b, alpha=0.05)
    assert ((res.lo > 0) | (res.hi < 0)).any(axis=0).mean() <= 0.05


def test_cluster_means_one_observation_per_prompt() -> None:
    values = np.array([80.0, 90.0, np.nan, 50.0, 70.0, 60.0])
    prompts = np.array(["p2", "p2", "p1", "p3", "p3", "p2"])
    got = cluster_means(values, prompts, ["p3", "p1", "p2"])
    np.testing.assert_allclose(got, [60.0, np.nan, 230 / 3])
    two = cluster_means(np.c_[values, values / 10], prompts, ["p2"])
    np.testing.assert_allclose(two, [[230 / 3, 23 / 3]])
    with pytest.raises(ValueError, match="without values"):
        cluster_means(values, prompts, ["p4"])


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"alpha": 0.0}, "alpha"),
    ({"alpha": 0.05, "upper": 50.0}, r"\[0.0, 50.0\]"),
    ({"alpha": 0.05, "population": 2}, "population"),
])
def test_rejects_bad_arguments(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        mean_confseq([10.0, 60.0, 70.0], **kwargs)  # type: ignore[arg-type]
