"""Sample-size formulas against hand-computed values and statsmodels' power solver."""

from __future__ import annotations

import math

import pytest
from statsmodels.stats.power import NormalIndPower

from essaybench.stats.sample_size import (
    detectable_difference,
    detectable_mean_difference,
    half_width,
    sample_size,
    sample_size_mean,
    z_value,
)

Z95 = 1.959963984540054  # Φ⁻¹(0.975)
Z80 = 0.8416212335729143  # Φ⁻¹(0.8)


def test_z_values() -> None:
    assert z_value(0.95) == pytest.approx(Z95, rel=1e-12)
    assert z_value(0.90) == pytest.approx(1.6448536269514722, rel=1e-12)
    assert z_value(0.99) == pytest.approx(2.5758293035489004, rel=1e-12)


@pytest.mark.parametrize(("e", "p", "level", "expected"), [
    (0.05, 0.5, 0.95, 385),  # 1.96²·0.25/0.0025 = 384.15
    (0.03, 0.5, 0.95, 1068),  # 1067.07
    (0.10, 0.5, 0.95, 97),  # 96.04
    (0.05, 0.2, 0.95, 246),  # 3.8415·0.16/0.0025 = 245.85
    (0.05, 0.5, 0.90, 271),  # 1.6449²·0.25/0.0025 = 270.55
    (0.05, 0.0, 0.95, 1),
])
def test_sample_size_hand_values(e: float, p: float, level: float, expected: int) -> None:
    assert sample_size(e, p, level) == expected


def test_half_width_inverts_sample_size() -> None:
    assert half_width(385) == pytest.approx(Z95 * math.sqrt(0.25 / 385), rel=1e-12)
    assert half_width(385) == pytest.approx(0.049944, abs=1e-6)
    for e in (0.02, 0.05, 0.08):
        n = sample_size(e)
        assert half_width(n) <= e < half_width(n - 1)


def test_detectable_difference_hand_value_and_statsmodels() -> None:
    # n = 100, p = ½: (1.95996 + 0.84162)·0.05 = 0.140079
    assert detectable_difference(100) == pytest.approx((Z95 + Z80) * 0.05, rel=1e-12)
    assert detectable_difference(100) == pytest.approx(0.140079, abs=1e-6)
    assert detectable_difference(100, power=0.5) == pytest.approx(half_width(100))
    for n, two in ((100, False), (250, True)):
        # statsmodels' effect size is δ/σ; ratio 0 = one sample, 1 = two equal groups.
        es = NormalIndPower().solve_power(effect_size=None, nobs1=n, alpha=0.05, power=0.8,
                                          ratio=1.0 if two else 0.0)
        assert detectable_difference(n, two_sample=two) == pytest.approx(es * 0.5, rel=1e-4)


def test_mean_versions() -> None:
    # sd 10, ±1 point: 1.96²·100 = 384.15 → 385; at n = 400, δ = 2.80158·10/20.
    assert sample_size_mean(10.0, 1.0) == 385
    assert detectable_mean_difference(400, 10.0) == pytest.approx((Z95 + Z80) * 0.5)


@pytest.mark.parametrize("call", [
    lambda: sample_size(0.0), lambda: sample_size(0.05, p=1.5),
    lambda: sample_size(0.05, level=1.0), lambda: half_width(0),
    lambda: detectable_difference(10, power=1.0), lambda: sample_size_mean(-1.0, 1.0),
])
def test_invalid_arguments(call: object) -> None:
    with pytest.raises(ValueError):
        call()  # type: ignore[operator]
