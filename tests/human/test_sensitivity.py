"""Tier separation: Mann–Whitney share by brute-force pair counting, exact p by enumeration."""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest

from essaybench.human.sensitivity import compare_tiers, tier_sensitivity, tiers_from_scores


def brute_share(x: list[float], y: list[float]) -> float:
    wins = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)
    return wins / (len(x) * len(y))


def exact_one_sided_p(x: list[float], y: list[float]) -> float:
    """P(U ≥ observed) over every split of the pooled values into groups of |x| and |y|."""
    pooled = x + y
    observed = brute_share(x, y)
    splits = list(itertools.combinations(range(len(pooled)), len(x)))
    hits = 0
    for chosen in splits:
        xs = [pooled[i] for i in chosen]
        ys = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        hits += brute_share(xs, ys) >= observed - 1e-12
    return hits / len(splits)


def test_share_and_exact_p_without_ties() -> None:
    high, low = [9.0, 7.5, 8.0, 3.0], [1.0, 2.0, 7.0, 4.0, 5.0]
    cmp = compare_tiers(high, low)
    assert cmp.u_share == pytest.approx(brute_share(high, low))
    assert cmp.u_statistic == pytest.approx(brute_share(high, low) * 20)
    assert cmp.p_value == pytest.approx(exact_one_sided_p(high, low), abs=1e-12)


def test_mean_difference_and_its_spread_by_pair_enumeration() -> None:
    high, low = [3.0, 3.0, 2.0, 5.0], [1.0, 2.0, 2.0]
    diffs = np.array([a - b for a in high for b in low])
    cmp = compare_tiers(high, low)
    assert cmp.mean_diff == pytest.approx(diffs.mean())
    assert cmp.sd_diff == pytest.approx(diffs.std())
    se = math.sqrt(np.var(high, ddof=1) / 4 + np.var(low, ddof=1) / 3)
    assert cmp.se_diff == pytest.approx(se)
    assert cmp.u_share == pytest.approx(brute_share(high, low))  # with ties counted half


def test_empty_tier_is_nan_and_missing_values_are_errors() -> None:
    cmp = compare_tiers([], [1.0, 2.0], higher_name="high", lower_name="low")
    assert cmp.n_higher == 0 and math.isnan(cmp.u_share) and math.isnan(cmp.p_value)
    with pytest.raises(ValueError, match="'high' and 'low'"):
        compare_tiers([float("nan")], [1.0], higher_name="high", lower_name="low")


def test_tier_sensitivity_rows_per_pair_and_group() -> None:
    rng = np.random.default_rng(11)
    tiers = ["high", "medium", "low"] * 20
    offset = {"high": 2.0, "medium": 1.0, "low": 0.0}
    df = pl.DataFrame({"tier": [*tiers, None],
                       "genre": ["a", "b"] * 30 + ["a"],
                       "score_unweighted": [offset[t] + rng.normal() for t in tiers] + [5.0]})
    out = tier_sensitivity(df, signal="score_unweighted", by="genre")
    assert out.select("genre", "higher", "lower").rows() == [
        (g, h, lo) for g in ("a", "b", "overall")
        for h, lo in (("high", "medium"), ("medium", "low"), ("high", "low"))]
    overall = out.filter((pl.col("genre") == "overall") & (pl.col("higher") == "high")
                         & (pl.col("lower") == "low")).row(0, named=True)
    high = df.filter(pl.col("tier") == "high")["score_unweighted"].to_list()
    low = df.filter(pl.col("tier") == "low")["score_unweighted"].to_list()
    assert overall["u_share"] == pytest.approx(brute_share(high, low))
    assert overall["n_higher"] == 20  # the untiered row is left out
    assert overall["signal"] == "score_unweighted"


def test_tier_sensitivity_rejects_unknown_tiers() -> None:
    df = pl.DataFrame({"tier": ["high", "top"], "s": [1.0, 2.0]})
    with pytest.raises(ValueError, match=r"unknown tiers \['top'\]"):
        tier_sensitivity(df, signal="s")


def test_tiers_from_scores() -> None:
    df = pl.DataFrame({"score": [0, 1, 2, 3, 4]})
    tiers = df.select(tiers_from_scores("score", high={3}, medium={2}, low={0, 1}))
    assert tiers.to_series().to_list() == ["low", "low", "medium", "high", None]
    with pytest.raises(ValueError, match="overlap"):
        tiers_from_scores("score", high={3}, medium={2, 3}, low={0})
