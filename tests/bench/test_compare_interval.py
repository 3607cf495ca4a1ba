"""The week-over-week change's interval (issue 25 item 11) against scipy's paired t."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats

from essaybench.bench.compare import compare_runs
from essaybench.stats.cluster_t import MIN_PROMPTS


def _week(scores: dict[str, list[float]], judge_id: str) -> pl.DataFrame:
    return pl.DataFrame([{"judge": "j", "model": model, "prompt_id": f"p{i}", "status": "ok",
                          "score_weighted": v, "judge_returned_model": judge_id}
                         for model, values in scores.items() for i, v in enumerate(values)])


def test_week_over_week_interval_is_the_paired_t_over_common_prompts() -> None:
    """Issue 25 item 11: the change's interval is scipy's paired t-interval of the
    per-prompt means over the prompts both weeks scored (not a percentile bootstrap);
    fewer than MIN_PROMPTS common prompts give none."""
    rng = np.random.default_rng(11)
    base = rng.normal(60, 8, 15)
    before = _week({"m": list(base)}, "j1")
    now_values = base + 2.0 + rng.normal(0, 3, 15)
    # Two essays per prompt this week: the per-prompt mean is what is paired.
    now = pl.concat([_week({"m": list(now_values - 1.0)}, "j1"),
                     _week({"m": list(now_values + 1.0)}, "j1")])
    row = compare_runs(now, before).row(0, named=True)
    ci = stats.ttest_rel(now_values, base).confidence_interval(0.95)
    assert (row["delta_lo"], row["delta_hi"]) == pytest.approx((ci.low, ci.high), rel=1e-10)
    assert row["significant"] is bool(ci.low > 0 or ci.high < 0)
    few = compare_runs(_week({"m": list(now_values[:MIN_PROMPTS - 1])}, "j1"),
                       _week({"m": list(base[:MIN_PROMPTS - 1])}, "j1")).row(0, named=True)
    assert few["delta_lo"] is None and few["significant"] is None


def test_change_and_interval_come_from_the_same_common_prompts() -> None:
    """Issue 28: a baseline with fewer prompts. The change is the mean of the per-prompt
    differences over the prompts both weeks scored (scipy's paired t over the same
    prompts), not the difference of the whole-run means ("+3.40 [+0.00, +0.00]")."""
    rng = np.random.default_rng(28)
    base = rng.normal(60, 8, 10)
    before = _week({"m": list(base)}, "j1")
    extra = [90.0, 95.0, 99.0, 92.0, 97.0]  # this week's new prompts score high
    same = _week({"m": [*base, *extra]}, "j1")  # the common prompts score the same
    row = compare_runs(same, before).row(0, named=True)
    assert row["n_common_prompts"] == 10
    assert row["mean_now"] == pytest.approx(np.mean([*base, *extra]))  # whole run, apart
    assert row["delta"] == 0.0 and (row["delta_lo"], row["delta_hi"]) == (0.0, 0.0)
    assert row["common_mean_now"] == pytest.approx(row["common_mean_before"])
    now_values = base + rng.normal(1.0, 2.0, 10)
    moved = compare_runs(_week({"m": [*now_values, *extra]}, "j1"), before).row(0, named=True)
    ci = stats.ttest_rel(now_values, base).confidence_interval(0.95)
    assert moved["delta"] == pytest.approx(float(np.mean(now_values - base)), rel=1e-12)
    assert moved["delta"] == pytest.approx(moved["common_mean_now"]
                                           - moved["common_mean_before"], rel=1e-12)
    assert (moved["delta_lo"], moved["delta_hi"]) == pytest.approx((ci.low, ci.high))
    assert moved["delta_lo"] <= moved["delta"] <= moved["delta_hi"]
