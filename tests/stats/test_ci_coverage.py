"""The coverage benchmark, small: 95% intervals cover the truth about 95% of the time."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.ci_coverage import SimConfig, run, simulate_pairwise, simulate_scores, summarise

SIMS = 400  # ~4 s: Bradley–Terry intervals need no bootstrap since issue 25
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
    # Bradley–Terry: every model but the reference (fixed at 1000) has an interval.
    for cov, per_sim in ((absolute, CFG.n_models), (bt, CFG.n_models - 1)):
        assert cov.intervals == SIMS * per_sim
        # 2,000–2,400 intervals, correlated within a simulation: the Monte Carlo SE over
        # simulations is ~0.5–0.7 points. Three of those either side
        # of 95%: honest for this many intervals, and still catches intervals that
        # are badly too short (e.g. unpaired or per-row resampling) or too long.
        se = max(cov.se_cluster, cov.se_binomial)
        assert se < 0.02, cov
        assert abs(cov.share - 0.95) <= 3 * se, cov


def test_realistic_scores_are_the_projects_rubric_scores() -> None:
    """The vectorised simulator scores like essaybench.bench.scoring: same weights, same
    normalisation, bounded 10–100; its exact truth agrees with a large Monte Carlo draw."""
    from benchmarks.score_sim import RealisticConfig, essay_scores, rubric_layout, true_means
    from essaybench.bench.judge.reading import trait_specs
    from essaybench.bench.rubrics import load_rubric
    from essaybench.bench.scoring import essay_score

    rubric = load_rubric()
    specs = trait_specs(rubric, "argumentative")
    qids = [q for t in specs for q in t.question_ids]
    weights, _, best = rubric_layout("argumentative")
    rng = np.random.default_rng(5)
    for _ in range(20):
        sub = rng.integers(1, 11, size=len(qids))
        ref = essay_score(specs, dict(zip(qids, sub.tolist(), strict=True)),
                          alpha=rubric.alpha_default)
        assert 100.0 * float(sub @ weights) / best == pytest.approx(ref.total, rel=1e-12)
    cfg = RealisticConfig()
    draws = essay_scores(np.random.default_rng(6), cfg, 40_000)[:, :, 0]
    assert draws.min() >= 10.0 and draws.max() <= 100.0
    se = draws.std(axis=0) / math.sqrt(draws.shape[0])
    assert np.all(np.abs(draws.mean(axis=0) - true_means(cfg)) < 4 * se)
    # Unequal variances, and the best model bunched against the ceiling (left-skewed).
    assert draws[:, 0].std() > 1.8 * draws[:, -1].std()
    assert float(((draws[:, -1] - draws[:, -1].mean()) ** 3).mean()) < 0


def test_mnar_failures_hit_weak_essays() -> None:
    from benchmarks.score_sim import RealisticConfig, essay_scores, failed

    cfg = RealisticConfig(fail_rate=0.0, mnar=0.1)
    rng = np.random.default_rng(2)
    scores = essay_scores(rng, cfg, 5_000)
    lost = failed(rng, cfg, scores)
    assert scores[lost].mean() < scores[~lost].mean() - 5
    assert not failed(rng, RealisticConfig(fail_rate=0.0), scores).any()


@pytest.mark.slow
def test_realistic_cells_of_15_prompts_cover() -> None:
    """Issue 16's done-when at the smallest Table 5 size: the production interval covers
    ≥ 94% (less two Monte Carlo SEs) of cell means and paired differences (~25 s)."""
    from benchmarks.ci_coverage import run_realistic
    from benchmarks.score_sim import RealisticConfig

    cov = run_realistic(15, 2000, 20250101, RealisticConfig(), ("cluster_t",))["cluster_t"]
    for c in cov:
        assert c.se_cluster < 0.004, c
        assert 0.94 - 2 * c.se_cluster <= c.share <= 0.96 + 2 * c.se_cluster, c


def test_heavy_tail_truth_and_skew_corrected_candidates() -> None:
    """Issue 25 item 8: the heavy-tail simulator's exact truth agrees with a large Monte
    Carlo draw, and the Johnson and Hall candidates equal their formulas solved here
    independently (Hall: root of the cubic-transformed t statistic, scipy's brentq)."""
    from scipy import optimize, stats

    from benchmarks import heavy_tail_sim
    from benchmarks.ci_methods import hall, johnson

    why = heavy_tail_sim.missing_reason()
    if why is not None:
        pytest.skip(why)
    pop = heavy_tail_sim.load_population()
    assert pop.n_models == 8 and pop.levels.shape[0] >= 200
    rng = np.random.default_rng(5)
    draws = np.vstack([heavy_tail_sim.essay_scores(rng, pop, 20_000) for _ in range(5)])
    np.testing.assert_allclose(draws.mean(axis=0), heavy_tail_sim.true_means(pop), atol=0.15)
    assert (draws < 45).mean() > 0.05  # the heavy lower tail: off-task essays near 35
    # One value per prompt: the influences are (x − x̄)/n.
    x = np.array([90.0, 88, 93, 35, 91, 87, 95, 40, 89, 92, 86, 94])
    n = len(x)
    sums, counts = x[:, None], np.ones((n, 1))
    none = np.array([], dtype=np.intp)
    se = x.std(ddof=1) / np.sqrt(n)
    gamma = np.mean((x - x.mean()) ** 3) / np.mean((x - x.mean()) ** 2) ** 1.5
    q = stats.t.ppf(0.975, n - 1)
    (lo, hi), _ = johnson(sums, counts, none, none, np.empty((0, n)), 0.95)
    shift = gamma * se / (6 * np.sqrt(n))
    assert (lo[0], hi[0]) == pytest.approx((x.mean() + shift - q * se,
                                            x.mean() + shift + q * se), rel=1e-12)

    def hall_t(theta: float) -> float:  # Hall (1992): T = √n·g(W), W = (x̄ − θ)/σ̂
        w = (x.mean() - theta) / (se * np.sqrt(n))
        return float(np.sqrt(n) * (w + gamma * w**2 / 3 + gamma**2 * w**3 / 27
                                   + gamma / (6 * n)))

    (h_lo, h_hi), _ = hall(sums, counts, none, none, np.empty((0, n)), 0.95)
    span = (x.mean() - 50 * se, x.mean() + 50 * se)
    assert h_lo[0] == pytest.approx(optimize.brentq(lambda t: hall_t(t) - q, *span), rel=1e-9)
    assert h_hi[0] == pytest.approx(optimize.brentq(lambda t: hall_t(t) + q, *span), rel=1e-9)
    assert h_hi[0] - x.mean() < x.mean() - h_lo[0]  # left-skewed: longer to the left
