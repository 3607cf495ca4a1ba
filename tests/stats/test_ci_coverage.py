"""The coverage benchmark, small: 95% intervals cover the truth about 95% of the time."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.ci_coverage import SimConfig, run, simulate_pairwise, simulate_scores, summarise

SIMS = 120
CFG = SimConfig(n_models=6, prompts_min=100, prompts_max=150, n_boot=500)


def test_simulated_truth_is_the_estimand() -> None:
    # Averaged over many prompts the simulated scores approach μ, and the true
    # strengths carry the same mean-zero normalisation as the fit.
    rng = np.random.default_rng(0)
    sums, counts, mu = simulate_scores(rng, CFG, 20_000)
    np.testing.assert_allclose(sums.sum(axis=0) / counts.sum(axis=0), mu, atol=0.15)
    enc, theta = simulate_pairwise(rng, CFG, 10)
    assert theta.sum() == pytest.approx(0.0, abs=1e-12)
    assert enc.counts.sum() == 10 * len(enc.pairs)


def test_summarise_counts_and_standard_errors() -> None:
    cov = summarise([np.array([True, False]), np.array([True, True])],
                    [np.array([1.0, 2.0]), np.array([3.0, 4.0])])
    assert (cov.share, cov.intervals, cov.mean_width) == (0.75, 4, 2.5)
    assert cov.se_binomial == pytest.approx(math.sqrt(0.75 * 0.25 / 4))
    assert cov.se_cluster == pytest.approx(np.std([0.5, 1.0], ddof=1) / math.sqrt(2))


@pytest.mark.slow
def test_coverage_near_nominal() -> None:
    absolute, bt = run(SIMS, seed=7, cfg=CFG)
    for cov in (absolute, bt):
        assert cov.intervals == SIMS * CFG.n_models
        # 720 intervals, correlated within a simulation: the Monte Carlo SE over
        # simulations is ~1–1.5 points (binomial ~0.8). Three of those either side
        # of 95%: honest for this many intervals, and still catches intervals that
        # are badly too short (e.g. unpaired or per-row resampling) or too long.
        se = max(cov.se_cluster, cov.se_binomial)
        assert se < 0.02, cov
        assert abs(cov.share - 0.95) <= 3 * se, cov
