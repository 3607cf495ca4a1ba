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
