"""Paired bootstrap of column means, checked against a naive per-replicate loop."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from essaybench.stats.bootstrap import (
    difference_ci,
    indistinguishable,
    paired_bootstrap_means,
    percentile_bounds,
    resample_counts,
)


def _naive(values: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """Index the rows replicate by replicate, nanmean each resampled matrix."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, values.shape[0], size=(n_boot, values.shape[0]))
    out = np.empty((n_boot, values.shape[1]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for b in range(n_boot):
            out[b] = np.nanmean(values[idx[b]], axis=0)
    return out


def _matrix(seed: int = 1, n: int = 40, k: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(70, 8, size=(n, 1)) + rng.normal(0, 3, size=(n, k)) + np.arange(k)


def test_replicates_equal_naive_row_resampling_with_missing_cells() -> None:
    values = _matrix()
    values[[3, 7, 11], 1] = np.nan
    res = paired_bootstrap_means(values, n_boot=300, seed=5)
    naive = _naive(values, 300, 5)
    np.testing.assert_allclose(res.boot, naive, rtol=1e-12)
    np.testing.assert_allclose(res.mean, np.nanmean(values, axis=0))
    np.testing.assert_allclose(res.lo, np.percentile(naive, 2.5, axis=0))
    np.testing.assert_allclose(res.hi, np.percentile(naive, 97.5, axis=0))
    assert res.n_boot == 300 and res.level == 0.95


def test_counts_are_chunked_without_changing_the_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    import essaybench.stats.bootstrap as mod

    whole = resample_counts(50, 30, np.random.default_rng(2))
    monkeypatch.setattr(mod, "_CHUNK_CELLS", 120)  # 2 replicates per chunk
    chunked = resample_counts(50, 30, np.random.default_rng(2))
    np.testing.assert_array_equal(whole, chunked)
    assert (whole.sum(axis=1) == 50).all()


def test_seed_reproducible_and_generator_accepted() -> None:
    values = _matrix()
    a = paired_bootstrap_means(values, n_boot=100, seed=3)
    b = paired_bootstrap_means(values, n_boot=100, seed=np.random.default_rng(3))
    c = paired_bootstrap_means(values, n_boot=100, seed=4)
    np.testing.assert_array_equal(a.boot, b.boot)
    assert not np.array_equal(a.boot, c.boot)


def test_all_missing_column_is_nan_not_an_error() -> None:
    values = _matrix()
    values[:, 2] = np.nan
    res = paired_bootstrap_means(values, n_boot=50, seed=0)
    assert np.isnan(res.mean[2]) and np.isnan(res.lo[2]) and np.isnan(res.hi[2])
    assert np.isfinite(res.lo[[0, 1, 3]]).all()
    assert difference_ci(res.boot, 0, 2) != difference_ci(res.boot, 0, 2)  # nan != nan
    assert indistinguishable(res.boot, 0, 2)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"values": np.zeros(5)}, "2-D"),
    ({"values": np.zeros((0, 3))}, "at least one"),
    ({"values": np.zeros((4, 2)), "level": 1.0}, "level"),
    ({"values": np.zeros((4, 2)), "level": 0.0}, "level"),
    ({"values": np.zeros((4, 2)), "n_boot": 0}, "n_boot"),
    ({"values": np.array([[1.0, np.inf]]), }, "finite"),
])
def test_invalid_inputs_raise(kwargs: dict[str, object], match: str) -> None:
    values = kwargs.pop("values")
    with pytest.raises(ValueError, match=match):
        paired_bootstrap_means(values, **kwargs)  # type: ignore[arg-type]


def test_difference_ci_is_the_percentile_of_paired_differences() -> None:
    values = _matrix(n=60)
    res = paired_bootstrap_means(values, n_boot=400, seed=9)
    diff = res.boot[:, 3] - res.boot[:, 0]
    lo, hi = difference_ci(res.boot, 3, 0, level=0.9)
    assert (lo, hi) == pytest.approx(tuple(np.percentile(diff, [5, 95])))


def test_pairing_makes_a_small_shift_distinguishable() -> None:
    # A constant +0.5 shift under a large shared prompt effect: the marginal CIs
    # overlap, yet the paired difference is exactly 0.5 in every replicate.
    rng = np.random.default_rng(0)
    base = rng.normal(70, 10, size=80)
    values = np.column_stack([base, base + 0.5])
    res = paired_bootstrap_means(values, n_boot=200, seed=1)
    assert res.hi[0] > res.lo[1]  # marginal intervals overlap
    assert not indistinguishable(res.boot, 1, 0)
    assert difference_ci(res.boot, 1, 0) == pytest.approx((0.5, 0.5))
    values2 = np.column_stack([base, base + rng.normal(0, 5, size=80)])
    assert indistinguishable(paired_bootstrap_means(values2, n_boot=200, seed=1).boot, 0, 1)


def test_difference_ci_index_checked() -> None:
    with pytest.raises(IndexError):
        difference_ci(np.zeros((10, 2)), 0, 2)


def test_percentile_bounds_equal_nanquantile_column_by_column() -> None:
    """Columns without NaN take np.quantile, the others np.nanquantile: every bound equals
    np.nanquantile's bit for bit, over clean, partly missing and all-missing columns."""
    rng = np.random.default_rng(11)
    for n_boot, n_items in ((2000, 60), (7, 5), (1, 3)):
        boot = rng.normal(50.0, 12.0, size=(n_boot, n_items))
        boot[:, 1::3] = np.round(boot[:, 1::3], 1)  # ties
        boot[rng.random(boot.shape) < 0.02] = np.nan  # a few replicates missing per column
        boot[:, 0::4] = rng.normal(size=(n_boot, len(range(0, n_items, 4))))  # clean again
        boot[:, -1] = np.nan  # a column never observed
        for level in (0.95, 0.9, 0.5001):
            alpha = (1.0 - level) / 2.0
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                want = [np.nanquantile(boot[:, k], [alpha, 1.0 - alpha]) for k in range(n_items)]
            lo, hi = percentile_bounds(boot, level)
            np.testing.assert_array_equal(lo, [w[0] for w in want])
            np.testing.assert_array_equal(hi, [w[1] for w in want])
