"""Choosing the last comparable run: same judges and rubric, prompts in common, a healthy
run, not in this run's lineage; runs passed over are named with why."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from essaybench.bench.health import CellHealth, RunHealth
from essaybench.core.contracts import StageOutput
from essaybench.runs.comparable import Baseline, incomparable, last_comparable_run
from essaybench.store import Snapshot, Store
from essaybench.store.run_stage import run_stage
from essaybench.store.runs import record_run


def frames(run_id: str, *, judge: str = "judge", fingerprint: str = "fp1",
           version: str = "ps-1", prompts: tuple[str, ...] = ("p0", "p1", "p2"),
           ) -> tuple[pl.DataFrame, pl.DataFrame]:
    # run_id in the text keeps each run's snapshots apart (content-addressed).
    essays = pl.DataFrame([{"prompt_id": p, "model": "writer", "prompt_set_version": version,
                            "essay_text": f"{run_id} 门", "status": "ok",
                            "returned_model": "writer-1"} for p in prompts])
    judged = pl.DataFrame([{"prompt_id": p, "model": "writer", "judge": judge,
                            "rubric_id": "essaybench.v1", "rubric_fingerprint": fingerprint,
                            "status": "ok", "score_weighted": 60.0 + i, "note": run_id,
                            "judge_returned_model": f"{judge}-1"}
                           for i, p in enumerate(prompts)])
    return essays, judged


def add_run(store: Store, run_id: str, *, healthy: bool = True, base_run: str | None = None,
            drifted: bool = False, **kw: str | tuple[str, ...]) -> Snapshot:
    """A run as the pipeline leaves it in the catalog: generate and judge snapshots, the
    health its aggregate stage recorded (and the drift stage's verdict, when ``drifted``)."""
    record_run(store, run_id, base_run=base_run, from_stage="judge" if base_run else None)
    essays, judged = frames(run_id, **kw)  # type: ignore[arg-type]
    gen = run_stage(store, run_id=run_id, stage="generate", upstream=[], params=None,
                    compute=lambda: StageOutput(essays))
    jud = run_stage(store, run_id=run_id, stage="judge", upstream=[gen], params=None,
                    compute=lambda: StageOutput(judged))
    cov = 1.0 if healthy else 0.0
    health = RunHealth(run_id=run_id, coverage_floor=0.9, cells=(CellHealth(
        model="writer", judge="judge", total=3, ok=round(3 * cov), coverage=cov,
        below_floor=not healthy, by_status={}, causes={}, sample_error=None,
        essay_failures=0, api_errors=0),))
    sid = store.start_stage_run(run_id, "aggregate", [jud.snapshot_id], {}, "test")
    store.finish_stage_run(sid, status="ok", meta={"health": health.model_dump(mode="json")})
    if drifted:
        verdicts = {"judges": {"judge": {"verdict": "drifted"}}}
        run_stage(store, run_id=run_id, stage="drift", upstream=[jud], params=None,
                  compute=lambda: StageOutput(pl.DataFrame({"run": [run_id]}),
                                              run_meta=verdicts))
    return jud


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def choose(store: Store, run_id: str, judged: Snapshot) -> Baseline:
    return last_comparable_run(store, run_id, judged)


def test_the_newest_earlier_comparable_run_is_chosen(store: Store) -> None:
    add_run(store, "w1")
    add_run(store, "w2")
    now = add_run(store, "w3")
    found = choose(store, "w3", now)
    assert found.run_id == "w2" and found.judged is not None and found.essays is not None
    assert found.essays.stage == "generate" and found.reason is None


def test_other_judge_rubric_prompts_and_unhealthy_runs_are_skipped(store: Store) -> None:
    add_run(store, "w1")  # the only comparable one
    add_run(store, "other-judge", judge="judge-b")
    add_run(store, "other-rubric", fingerprint="fp2")
    add_run(store, "other-prompts", version="ps-2", prompts=("q0", "q1"))
    add_run(store, "unhealthy", healthy=False)
    now = add_run(store, "w6")
    found = choose(store, "w6", now)
    assert found.run_id == "w1"
    why = dict(found.skipped)
    assert list(why) == ["unhealthy", "other-prompts", "other-rubric", "other-judge"]
    assert why["unhealthy"].startswith("unhealthy: 1 of 1")
    assert why["other-prompts"].startswith("no prompt in common")
    assert "other rubric for judge" in why["other-rubric"]
    assert why["other-judge"].startswith("other judges (judge-b)")


def test_another_prompt_set_with_overlapping_prompts_is_comparable(store: Store) -> None:
    add_run(store, "w1", version="ps-1", prompts=("p0", "p1", "p9"))
    now = add_run(store, "w2", version="ps-2", prompts=("p0", "p1", "p2"))
    assert choose(store, "w2", now).run_id == "w1"


def test_no_comparable_run_says_why(store: Store) -> None:
    first = add_run(store, "w1")
    assert choose(store, "w1", first) == Baseline(None, None, None,
                                                   "no earlier run with a judge stage")
    add_run(store, "w2", judge="judge-b")
    now = add_run(store, "w3", fingerprint="fp9")
    found = choose(store, "w3", now)
    assert found.run_id is None
    assert found.reason is not None and found.reason.startswith(
        "2 earlier run(s), none comparable: w2: other judges (judge-b); w1: other rubric")


def test_a_rerun_is_not_compared_with_the_run_it_continues(store: Store) -> None:
    add_run(store, "w1")
    add_run(store, "w2")
    rerun = add_run(store, "w2-rerun", base_run="w2")
    assert choose(store, "w2-rerun", rerun).run_id == "w1"
    # A later run is not a baseline of an earlier one.
    first = store.latest_ok_snapshot("judge", "w1")
    assert first is not None and choose(store, "w1", first).run_id is None


def test_a_rerun_is_compared_with_its_original_runs_baseline(store: Store) -> None:
    """Issue 25 item 2: reruns of week 3 made after week 4 are week 3: compared with week
    2 (not week 4, nor a sibling rerun of week 3, which serves the same ledger rows); and
    week 5 is compared with week 4, not with a rerun of week 3 made later than week 4."""
    for week in ("w1", "w2", "w3", "w4"):
        add_run(store, week)
    first = add_run(store, "w3-rerun-a", base_run="w3")
    found = choose(store, "w3-rerun-a", first)
    assert found.run_id == "w2" and found.original == "w3"
    assert found.line("w3-rerun-a").startswith(
        "baseline: w2 (the baseline of w3, the run w3-rerun-a reruns), the newest earlier run")
    second = add_run(store, "w3-rerun-b", base_run="w3")
    assert choose(store, "w3-rerun-b", second).run_id == "w2"
    again = add_run(store, "w3-rerun-c", base_run="w3-rerun-a")  # a rerun of a rerun
    assert choose(store, "w3-rerun-c", again).run_id == "w2"
    now = add_run(store, "w5")
    assert choose(store, "w5", now).run_id == "w4"


def test_a_healthy_rerun_of_a_failed_week_stands_for_that_week(store: Store) -> None:
    add_run(store, "w1")
    add_run(store, "w2", healthy=False)  # the judge was down
    add_run(store, "w2-rerun", base_run="w2")  # judged again, healthy
    now = add_run(store, "w3")
    found = choose(store, "w3", now)
    assert found.run_id == "w2-rerun"
    assert found.original is None
    assert found.line("w3").startswith("baseline: w2-rerun, the newest earlier run")


def test_pure_check() -> None:
    e1, j1 = frames("a")
    e2, j2 = frames("b")
    assert incomparable(j1, e1, j2, e2) is None
    e3, j3 = frames("c", judge="other")
    assert incomparable(j1, e1, j3, e3) == "other judges (other)"
