"""This week vs last week: deltas, paired CIs over common prompts, drift, the baseline."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from essaybench.bench.compare import compare_runs
from essaybench.runs.compare import choose_baseline, compare_snapshots
from essaybench.store import Snapshot, Store


def _week(scores: dict[str, list[float | None]], judge_id: str) -> pl.DataFrame:
    rows = []
    for model, values in scores.items():
        for i, v in enumerate(values):
            rows.append({"judge": "j", "model": model, "prompt_id": f"p{i}",
                         "status": "ok" if v is not None else "parse_error",
                         "score_weighted": v, "judge_returned_model": judge_id})
    return pl.DataFrame(rows)


def test_compare_runs_delta_ci_and_drift() -> None:
    rng = np.random.default_rng(3)
    base = rng.normal(60, 8, 40)
    before = _week({"up": list(base), "same": list(base)}, "judge-2025-01")
    shifted = list(base + 6 + rng.normal(0, 1, 40))
    noisy: list[float | None] = list(base + rng.normal(0, 1, 40))
    noisy[0] = None  # one failed judgment this week: excluded, counted in coverage
    now = _week({"up": shifted, "same": noisy}, "judge-2025-02")
    essays_now = pl.DataFrame({"model": ["up", "same"], "returned_model": ["up-v2", "same-v1"]})
    essays_before = pl.DataFrame({"model": ["up", "same"], "returned_model": ["up-v1", "same-v1"]})
    table = {r["model"]: r for r in compare_runs(
        now, before, essays_now=essays_now, essays_before=essays_before, n_boot=500,
        seed=1).iter_rows(named=True)}
    up, same = table["up"], table["same"]
    assert up["delta"] == pytest.approx(np.mean(shifted) - np.mean(base))
    assert up["significant"] and up["delta_lo"] > 0
    assert up["n_common_prompts"] == 40 and up["drift"] == "model,judge"
    assert same["coverage_now"] == pytest.approx(39 / 40) and same["n_common_prompts"] == 39
    assert same["mean_now"] == pytest.approx(np.mean([v for v in noisy if v is not None]))
    assert same["delta_lo"] < 0 < same["delta_hi"] and same["significant"] is False
    assert same["drift"] == "judge"


def test_model_in_one_run_only_has_no_delta() -> None:
    table = compare_runs(_week({"a": [50.0, 60.0]}, "j1"), _week({"b": [50.0, 60.0]}, "j1"),
                         n_boot=100)
    assert table["delta"].to_list() == [None, None]
    assert table["n_common_prompts"].to_list() == [0, 0]


def test_previous_run_and_snapshots(judged_run: tuple[Store, Snapshot, Snapshot]) -> None:
    store, judged, _ = judged_run
    with pytest.raises(LookupError, match="no run to compare r1 with"):
        choose_baseline(store, "r1")
    with pytest.raises(LookupError, match="no successful judge"):
        choose_baseline(store, "nope")
    same = compare_snapshots(store, judged, judged, n_boot=100)
    assert set(same["delta"].to_list()) == {0.0} and same["drift"].null_count() == same.height
