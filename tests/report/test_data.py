"""What the report reads from real stores: every stage's output when the run has it, the
reason when it has not, and the judge snapshot a rerun without a judge stage reads."""

from __future__ import annotations

import polars as pl
import pytest

from essaybench.core.errors import NotFoundError
from essaybench.report.data import find_judged, load_run
from essaybench.stages.aggregate import aggregate_stage
from essaybench.store import Store
from tests.conftest import JudgedRun
from tests.helpers import JUDGED_WRITERS
from tests.report.conftest import ReportedRuns


def test_a_run_through_every_stage(reported_runs: ReportedRuns) -> None:
    store = reported_runs.store
    data = load_run(store, "r2")
    assert data.snapshots["judge"] == reported_runs.judged["r2"].snapshot_id
    # 3 writers × (16 prompts of the four genres + the bundled set's 3 open-genre prompts)
    assert data.judgments.height == data.essays.height == 57
    assert data.pairwise is not None and data.pairwise.height > 0
    assert {"score_ci_weighted", "score_diff_weighted", "length_bias", "win_rates",
            "bradley_terry", "position_bias"} <= set(data.stats)
    # The stats tables are the stats stage's own files, not recomputed.
    folder = store.root / "reports" / "r2" / "stats"
    assert data.stats["score_ci_weighted"].equals(
        pl.read_parquet(folder / "score_ci_weighted.parquet"))
    assert data.alerts is not None and data.alerts.base_run == "r1"
    assert {"off_language", "failure_rate"} <= {a.kind for a in data.alerts.alerts}
    comparison = data.alerts.comparison
    assert comparison is not None and set(comparison["model"]) == set(JUDGED_WRITERS)
    assert data.drift is not None and data.drift["qwen-judge"]["verdict"] == "calibrated"
    assert data.health is not None and "deepseek-writer" in data.health  # failures: unhealthy
    assert data.notes.stats is data.notes.pairwise is data.notes.alerts is None


def test_the_first_week_has_nothing_to_compare(reported_runs: ReportedRuns) -> None:
    data = load_run(reported_runs.store, "r1")
    assert data.alerts is not None and data.alerts.base_run is None
    assert data.alerts.reason and data.alerts.comparison is None
    assert data.drift is None  # r1 ran no drift stage


def test_stages_that_did_not_run_leave_a_reason(judged_run: JudgedRun) -> None:
    store, judged, _ = judged_run  # r1: generate, judge and pairwise only
    data = load_run(store, "r1")
    assert data.stats == {} and data.alerts is None and data.drift is None
    assert data.notes.stats is not None and "essaybench stats --run r1" in data.notes.stats
    assert data.notes.alerts is not None and data.pairwise is not None
    assert data.snapshots["judge"] == judged.snapshot_id


def test_a_rerun_without_a_judge_stage_reads_the_judgments_its_aggregate_read(
        judged_copy: JudgedRun) -> None:
    store, judged, _ = judged_copy
    aggregate_stage(store, "r9", judged)  # a rerun from aggregate: no judge stage of its own
    assert find_judged(store, "r9").snapshot_id == judged.snapshot_id
    data = load_run(store, "r9")
    assert data.pairwise is None and data.notes.pairwise is not None
    assert "pairwise was not run" in data.notes.pairwise


def test_a_run_without_judgments_is_an_error_naming_it(judged_run: JudgedRun) -> None:
    store = Store(judged_run[0].root, read_only=True)
    with pytest.raises(NotFoundError, match="run nope has no successful judge stage"):
        load_run(store, "nope")
