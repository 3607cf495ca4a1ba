"""How many prompts a comparison needs, and what a given number can resolve.

All formulas use the normal approximation with a two-sided z = Φ⁻¹(1 − (1 − level)/2)
(1.96 at level 0.95):

* :func:`sample_size` — n = ⌈z²·p(1−p)/e²⌉ prompts so that a proportion (a win
  rate) near p is estimated within ±e. p = ½ is the worst case.
* :func:`half_width` — e = z·√(p(1−p)/n), the inverse: the ± of a 95% interval at n.
* :func:`detectable_difference` — the smallest true difference δ from a
  reference value (a win rate from ½, or a paired mean difference from 0) that
  a two-sided test at ``level`` detects with probability ``power``:
  δ = (z + z_power)·√(p(1−p)/n), z_power = Φ⁻¹(power). With power = ½ this is
  the half-width. ``two_sample=True`` compares two independent proportions
  of n each: the variance doubles, δ grows by √2.
* :func:`sample_size_mean` / :func:`detectable_mean_difference` — the same for a
  mean score with standard deviation sd (for paired model comparisons use the
  sd of the per-prompt score differences): n = ⌈z²·sd²/e²⌉,
  δ = (z + z_power)·sd/√n.
"""

from __future__ import annotations

import math

from scipy.stats import norm

from essaybench.stats.bootstrap import check_level

# Guards ⌈·⌉ against floating-point noise just above an exact integer.
_EPS = 1e-9


def z_value(level: float = 0.95) -> float:
    """Two-sided critical value Φ⁻¹(1 − (1 − level)/2)."""
    return float(norm.ppf(1.0 - (1.0 - check_level(level)) / 2.0))


def _check_p(p: float) -> float:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must lie in [0, 1], got {p!r}")
    return float(p)


def _check_positive(name: str, value: float) -> float:
    if not value > 0 or math.isinf(value):
        raise ValueError(f"{name} must be positive and finite, got {value!r}")
    return float(value)


def _check_n(n: int) -> int:
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    return int(n)


def _z_power(power: float) -> float:
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must lie strictly between 0 and 1, got {power!r}")
    return float(norm.ppf(power))


def sample_size(e: float, p: float = 0.5, level: float = 0.95) -> int:
    """Prompts needed to estimate a proportion near p within ±e: ⌈z²·p(1−p)/e²⌉ (≥ 1)."""
    e, p = _check_positive("e", e), _check_p(p)
    return max(1, math.ceil(z_value(level) ** 2 * p * (1 - p) / e**2 - _EPS))


def half_width(n: int, p: float = 0.5, level: float = 0.95) -> float:
    """± of the level-interval of a proportion near p from n prompts: z·√(p(1−p)/n)."""
    return z_value(level) * math.sqrt(_check_p(p) * (1 - p) / _check_n(n))


def detectable_difference(n: int, p: float = 0.5, level: float = 0.95, power: float = 0.8,
                          *, two_sample: bool = False) -> float:
    """Smallest true difference in a proportion detectable at ``level`` with ``power``."""
    variance = _check_p(p) * (1 - p) * (2.0 if two_sample else 1.0)
    return (z_value(level) + _z_power(power)) * math.sqrt(variance / _check_n(n))


def sample_size_mean(sd: float, e: float, level: float = 0.95) -> int:
    """Prompts needed to estimate a mean score within ±e: ⌈z²·sd²/e²⌉ (≥ 1)."""
    sd, e = _check_positive("sd", sd), _check_positive("e", e)
    return max(1, math.ceil(z_value(level) ** 2 * sd**2 / e**2 - _EPS))


def detectable_mean_difference(n: int, sd: float, level: float = 0.95,
                               power: float = 0.8) -> float:
    """Smallest true mean difference detectable from n prompts: (z + z_power)·sd/√n."""
    sd = _check_positive("sd", sd)
    return (z_value(level) + _z_power(power)) * sd / math.sqrt(_check_n(n))
