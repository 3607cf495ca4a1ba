"""``essaybench runs`` at 80 columns, and the one-line errors of ``rerun`` and
``run --reuse-from`` when the run (or what a rerun reads) is not there."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from essaybench.cli import app
from essaybench.store import Store
from essaybench.store.runs import record_run
from essaybench.store.store import new_run_id


def stage_run(store: Store, run_id: str, stage: str, status: str = "ok",
              error: str | None = None) -> None:
    started = store.start_stage_run(run_id, stage, [], {}, "test", rows_in=12)
    snapshot = None
    if status == "ok":
        snapshot = store.write_snapshot(stage, pl.DataFrame({"run": [run_id], "stage": [stage]}))
    store.finish_stage_run(started, status=status, rows_in=12, rows_out=12 if snapshot else None,
                           snapshot_id=snapshot.snapshot_id if snapshot else None, error=error)


def test_runs_shows_whole_run_ids_at_80_columns(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "store")
    first, second, third = new_run_id(), new_run_id(), new_run_id()
    record_run(store, first, config_path=tmp_path / "benchmark.yaml")
    for stage in ("generate", "judge", "aggregate"):
        stage_run(store, first, stage)
    record_run(store, second, base_run=first, from_stage="judge")
    stage_run(store, second, "judge", "failed",
              error="StageFailed: judge endpoint refused the connection\ntraceback...")
    stage_run(store, third, "generate")  # a run from before runs were recorded
    monkeypatch.setenv("COLUMNS", "80")

    out = CliRunner().invoke(app, ["runs", "--store", str(store.root)], env={"COLUMNS": "80"})

    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    for run_id in (first, second, third):
        assert any(run_id in line for line in lines), run_id  # whole, on one line
    heading = lines.index(f"run {second}")
    assert lines[heading + 1].strip() == f"rerun of {first} from judge"
    assert any("judge: StageFailed: judge endpoint refused the connection" in line
               for line in lines)
    assert "traceback" not in out.output


def test_rerun_of_an_unknown_run_or_a_run_without_essays_is_a_one_line_error(
        tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    record_run(store, "f1")
    stage_run(store, "f1", "generate", "failed", error="boom")
    record_run(store, "f2", base_run="f1", from_stage="aggregate")
    runner = CliRunner()
    for args, expected in (
            (["rerun", "--run", "nope", "--stage", "judge"], "no run 'nope'"),
            (["rerun", "--run", "f2", "--stage", "judge"],
             "cannot rerun 'judge' from run f1: its 'generate' stage did not succeed"),
            (["run", "--no-curate", "--reuse-from", "ghost"], "no run 'ghost'")):
        out = runner.invoke(app, [*args, "--store", str(store.root)], env={"COLUMNS": "200"})
        assert out.exit_code == 2, out.output
        assert expected in out.output, out.output
        assert "Traceback" not in out.output
