"""Drift verdicts against independent computations: the shift is the mean paired
difference, ρ and τ are recomputed from ranks by hand, and each rule decides alone."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
import pytest
from scipy import stats

from essaybench.bench.drift import (
    DriftParams,
    assess_drift,
    first_calibration,
    identity_changes,
    judge_identity,
)

PARAMS = DriftParams(min_anchors=6, n_boot=1000)


def table(scores: Sequence[float | None], judge: str = "j") -> pl.DataFrame:
    return pl.DataFrame({
        "prompt_id": [f"a{i}" for i in range(len(scores))], "judge": [judge] * len(scores),
        "status": ["ok" if s is not None else "parse_error" for s in scores],
        "score_weighted": scores}, schema={"prompt_id": pl.Utf8, "judge": pl.Utf8,
                                           "status": pl.Utf8, "score_weighted": pl.Float64})


def ranks(x: np.ndarray) -> np.ndarray:
    order = x.argsort()
    r = np.empty(len(x))
    r[order] = np.arange(1, len(x) + 1)
    return r


REF = [40.0, 85.0, 62.0, 30.0, 71.0, 55.0, 90.0, 47.0, 66.0, 35.0]


def test_the_same_scores_are_stable() -> None:
    drift = assess_drift("j", table(REF), table(REF), PARAMS)
    assert (drift.verdict, drift.shift) == ("stable", 0.0)
    assert drift.spearman == pytest.approx(1.0) and drift.kendall == pytest.approx(1.0)
    assert drift.comparable and drift.n_paired == 10


def test_a_uniform_shift_beyond_tolerance_drifts_though_the_ranking_holds() -> None:
    now = [s + 8 for s in REF]
    drift = assess_drift("j", table(now), table(REF), PARAMS)
    assert drift.verdict == "drifted" and not drift.comparable
    assert drift.shift == pytest.approx(8.0) and drift.spearman == pytest.approx(1.0)
    assert drift.shift_lo == pytest.approx(8.0) and "mean shift +8.0" in drift.reason
    # A small shift within tolerance is not drift.
    assert assess_drift("j", table([s + 2 for s in REF]), table(REF), PARAMS).verdict \
        == "stable"


def test_a_shift_whose_ci_includes_zero_is_not_drift() -> None:
    noisy = [s + d for s, d in zip(REF, [30, -25, 28, -26, 27, -24, 5, 6, -3, 2], strict=True)]
    drift = assess_drift("j", table(noisy), table(REF), PARAMS.model_copy(
        update={"min_rank_correlation": -1.0}))
    assert drift.shift is not None and abs(drift.shift) >= 2
    assert drift.shift_lo is not None and drift.shift_hi is not None
    assert drift.shift_lo < 0 < drift.shift_hi and drift.verdict == "stable"
    # Issue 25 item 11: the shift's interval is scipy's paired t-interval over anchors.
    ci = stats.ttest_rel(noisy, REF).confidence_interval(0.95)
    assert (drift.shift_lo, drift.shift_hi) == pytest.approx((ci.low, ci.high), rel=1e-10)


def test_a_reordered_judge_drifts_on_rank_correlation() -> None:
    now = REF[::-1]  # same mean, order reversed
    drift = assess_drift("j", table(now), table(REF), PARAMS)
    x, y = np.array(REF), np.array(now)
    rx, ry = ranks(x), ranks(y)
    rho = np.corrcoef(rx, ry)[0, 1]
    n = len(x)
    concordant = sum(np.sign(x[i] - x[j]) * np.sign(y[i] - y[j])
                     for i in range(n) for j in range(i + 1, n))
    assert drift.spearman == pytest.approx(rho)
    assert drift.kendall == pytest.approx(concordant / (n * (n - 1) / 2))
    assert drift.verdict == "drifted" and "rank correlation" in drift.reason
    assert drift.shift == pytest.approx(0.0)


def test_too_few_anchors_scored_both_times_is_unverified_not_stable() -> None:
    now = [REF[0], None, None, None, None, REF[5], REF[6], REF[7], None, None]
    drift = assess_drift("j", table(now), table(REF), PARAMS)
    assert drift.verdict == "unverified" and not drift.comparable
    assert (drift.n_anchors, drift.n_ok, drift.n_paired) == (10, 4, 4)
    assert "only 4 of 10 anchors" in drift.reason


def test_first_calibration_and_a_forced_change() -> None:
    first = first_calibration("j", table(REF), PARAMS, None)
    assert first.verdict == "calibrated" and first.comparable
    assert first.mean_now == pytest.approx(float(np.mean(REF)))
    forced = first_calibration("j", table(REF), PARAMS, ["rubric: a → b"])
    assert forced.verdict == "recalibrated" and not forced.comparable
    assert "rubric: a → b" in forced.reason


def test_identity_hashes_every_part_and_changes_name_them() -> None:
    base = judge_identity("j", {"model_id": "m1"}, {"temperature": 0.2}, "r@1", "p@1",
                          "anchors@1")
    assert base == judge_identity("j", {"model_id": "m1"}, {"temperature": 0.2}, "r@1",
                                  "p@1", "anchors@1")
    other = judge_identity("j", {"model_id": "m2"}, {"temperature": 0.2}, "r@2", "p@1",
                           "anchors@1")
    assert other["id"] != base["id"]
    assert identity_changes(base, other) == ["endpoint: model_id=m1 → model_id=m2",
                                             "rubric: r@1 → r@2"]
