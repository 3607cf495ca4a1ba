"""Cluster t-intervals against scipy's t-tests and statsmodels' cluster-robust OLS."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats

from essaybench.stats.cluster_t import (
    MIN_PROMPTS,
    NOTE_NO_SCORE,
    NOTE_NO_SPREAD,
    NOTE_TOO_FEW,
    cluster_t_differences,
    cluster_t_means,
)


def _one_per_prompt(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    # Bounded, discrete, skewed: like rubric scores, not like the normal the t assumes.
    return np.asarray(np.minimum(100.0, 10.0 * rng.integers(5, 13, size=(n, k))), dtype=float)


@pytest.mark.parametrize("n", [MIN_PROMPTS, 15, 60])
def test_one_score_per_prompt_is_the_one_sample_t_interval(n: int) -> None:
    x = _one_per_prompt(np.random.default_rng(n), n, 3)
    res = cluster_t_means(x, np.ones_like(x), level=0.9)
    for k in range(3):
        ref = stats.ttest_1samp(x[:, k], 0.0).confidence_interval(0.9)
        assert (res.lo[k], res.hi[k]) == pytest.approx((ref.low, ref.high), rel=1e-12)
        assert res.estimate[k] == pytest.approx(x[:, k].mean(), rel=1e-14)
        assert res.note[k] == "" and res.n_prompts[k] == n


def test_paired_differences_are_the_paired_t_interval() -> None:
    rng = np.random.default_rng(3)
    prompt = rng.normal(0, 8, size=(20, 1))
    x = 70 + prompt + rng.normal(0, 3, size=(20, 3)) + np.array([0.0, 1.5, -2.0])
    res = cluster_t_differences(x, np.ones_like(x), np.array([0, 0, 1]), np.array([1, 2, 2]))
    for k, (a, b) in enumerate([(0, 1), (0, 2), (1, 2)]):
        ref = stats.ttest_rel(x[:, a], x[:, b]).confidence_interval(0.95)
        assert (res.lo[k], res.hi[k]) == pytest.approx((ref.low, ref.high), rel=1e-12)
    # Paired is much tighter than treating the two columns as independent samples.
    unpaired = stats.ttest_ind(x[:, 0], x[:, 1]).confidence_interval(0.95)
    assert res.hi[0] - res.lo[0] < 0.5 * (unpaired.high - unpaired.low)


def test_ratio_means_and_differences_equal_cluster_robust_ols() -> None:
    """Several (or no) ok scores per prompt: the delta-method variance of a pooled mean is
    statsmodels' cluster-robust (by prompt) variance of an intercept, × G/(G−1)."""
    rng = np.random.default_rng(11)
    n = 17
    scores = [[[float(v) for v in 60 + 10 * rng.integers(0, 5, size=int(rng.integers(0, 4)))]
               for _ in range(2)] for _ in range(n)]  # scores[p][model]
    sums = np.array([[sum(s) for s in row] for row in scores])
    counts = np.array([[len(s) for s in row] for row in scores], dtype=float)
    res = cluster_t_means(sums, counts)
    diff = cluster_t_differences(sums, counts, np.array([0]), np.array([1]))
    for k in range(2):
        y = np.array([v for row in scores for v in row[k]])
        g = np.array([p for p, row in enumerate(scores) for _ in row[k]])
        n_g = len(set(g.tolist()))
        fit = sm.OLS(y, np.ones_like(y)).fit(cov_type="cluster", cov_kwds={
            "groups": g, "use_correction": False})
        se = np.sqrt(fit.cov_params()[0, 0] * n_g / (n_g - 1))
        q = stats.t.ppf(0.975, n_g - 1)
        assert res.n_prompts[k] == n_g
        assert (res.lo[k], res.hi[k]) == pytest.approx(
            (fit.params[0] - q * se, fit.params[0] + q * se), rel=1e-10)
    # The difference: OLS on a model dummy, clustered by prompt; its coefficient is the
    # difference of the pooled means and its sandwich has the same influences.
    y = np.array([v for row in scores for k in (0, 1) for v in row[k]])
    is_b = np.array([k for row in scores for k in (0, 1) for _ in row[k]], dtype=float)
    g = np.array([p for p, row in enumerate(scores) for k in (0, 1) for _ in row[k]])
    n_g = len(set(g.tolist()))
    fit = sm.OLS(y, np.column_stack([np.ones_like(y), -is_b])).fit(
        cov_type="cluster", cov_kwds={"groups": g, "use_correction": False})
    # Reparametrise: intercept = mean of model 0 ... coefficient on −is_b = R_0 − R_1.
    se = np.sqrt(fit.cov_params()[1, 1] * n_g / (n_g - 1))
    q = stats.t.ppf(0.975, n_g - 1)
    assert diff.estimate[0] == pytest.approx(fit.params[1], rel=1e-10)
    assert (diff.lo[0], diff.hi[0]) == pytest.approx(
        (fit.params[1] - q * se, fit.params[1] + q * se), rel=1e-10)


def test_too_few_prompts_no_score_and_no_spread_have_no_interval() -> None:
    x = np.full((MIN_PROMPTS, 4), np.nan)
    x[:, 0] = np.arange(MIN_PROMPTS) + 60.0  # enough prompts, spread: an interval
    x[: MIN_PROMPTS - 1, 1] = np.arange(MIN_PROMPTS - 1) + 60.0  # one prompt short
    x[:, 3] = 80.0  # every prompt the same score
    counts = (~np.isnan(x)).astype(float)
    res = cluster_t_means(np.nan_to_num(x), counts)
    assert res.note == ["", NOTE_TOO_FEW, NOTE_NO_SCORE, NOTE_NO_SPREAD]
    assert np.isfinite(res.lo[0]) and np.isnan(res.lo[1:]).all() and np.isnan(res.hi[1:]).all()
    assert res.estimate[1] == pytest.approx(60 + (MIN_PROMPTS - 2) / 2)
    assert np.isnan(res.estimate[2])
    assert "n too small" in NOTE_TOO_FEW
    # A difference needs enough prompts on each side, not just in the union.
    d = cluster_t_differences(np.nan_to_num(x), counts, np.array([0, 0, 0]),
                              np.array([1, 2, 3]))
    assert d.note == [NOTE_TOO_FEW, NOTE_NO_SCORE, ""]
    assert np.isnan(d.lo[:2]).all() and np.isfinite(d.lo[2])
    with pytest.raises(ValueError, match="one shape"):
        cluster_t_means(np.zeros((3, 2)), np.zeros((3, 1)))
    with pytest.raises(ValueError, match="level"):
        cluster_t_means(np.zeros((3, 2)), np.ones((3, 2)), level=95)
