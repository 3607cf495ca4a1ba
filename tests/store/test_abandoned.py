"""Stage runs left ``running`` by a dead process are listed as ``abandoned`` (issue 12,
item 2): each stage run records its pid and host and refreshes a heartbeat while it runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest
from typer.testing import CliRunner

from essaybench.cli import app
from essaybench.core.contracts import StageOutput
from essaybench.core.paths import PROJECT_ROOT
from essaybench.store import Store, liveness
from essaybench.store.liveness import listed_status, this_host
from essaybench.store.run_stage import run_stage

CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from essaybench.store import Store
    from essaybench.store.run_stage import run_stage

    root, marker = Path(sys.argv[1]), Path(sys.argv[2])

    def compute():
        marker.write_text("computing")
        time.sleep(600)  # killed long before this ends

    run_stage(Store(root), run_id="r-killed", stage="generate", upstream=[], params={},
              compute=compute)
""")


def _wait_for(path: Path, proc: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else b""
            raise AssertionError(f"child exited early: {err!r}")
        if time.monotonic() > deadline:
            raise AssertionError("child never started its stage")
        time.sleep(0.05)


def test_a_stage_run_killed_with_sigkill_is_listed_as_abandoned(tmp_path: Path) -> None:
    root, marker = tmp_path / "store", tmp_path / "computing"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(root), str(marker)],
                            cwd=PROJECT_ROOT, stderr=subprocess.PIPE)
    try:
        _wait_for(marker, proc)
        [alive] = Store(root).stage_runs("r-killed")
        assert (alive.status, alive.pid, alive.host) == ("running", proc.pid, this_host())
        assert alive.heartbeat_at is not None
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    [dead] = Store(root).stage_runs("r-killed")
    assert dead.status == "abandoned" and dead.ended_at is None
    with duckdb.connect(str(root / "catalog.duckdb"), read_only=True) as con:
        assert con.execute("select status from stage_runs").fetchall() == [("running",)]
    out = CliRunner().invoke(app, ["runs", "--store", str(root)])
    assert out.exit_code == 0, out.output
    assert "abandoned" in out.output and "running" not in out.output


def test_the_heartbeat_advances_while_a_stage_computes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(liveness, "HEARTBEAT_S", 0.05)
    store = Store(tmp_path / "store")
    seen: list[tuple[datetime, datetime | None, str]] = []

    def compute() -> StageOutput:
        time.sleep(0.5)
        [row] = store.stage_runs("r1")
        seen.append((row.started_at, row.heartbeat_at, row.status))
        return StageOutput(pl.DataFrame({"decision": ["kept"]}))

    run_stage(store, run_id="r1", stage="aggregate", upstream=[], params={}, compute=compute)
    [(started, beat, status)] = seen
    assert status == "running" and beat is not None and beat > started
    [done] = store.stage_runs("r1")
    assert done.status == "ok" and done.pid == os.getpid()


def _running_row(store: Store, *, host: str, pid: int, heartbeat_age_s: float) -> None:
    stage_run_id = store.start_stage_run("r1", "judge", [], {}, "test")
    with store.connect() as con:
        con.execute("update stage_runs set host = ?, pid = ?, heartbeat_at = ? "
                    "where stage_run_id = ?",
                    [host, pid, datetime.now(UTC) - timedelta(seconds=heartbeat_age_s),
                     stage_run_id])


@pytest.mark.parametrize("host,pid,age_s,status", [
    ("elsewhere", 12345, 30, "running"),  # another host: trust a fresh heartbeat
    ("elsewhere", 12345, 3600, "abandoned"),  # ... and not a stale one
    ("here", "self", 30, "running"),  # this host, process alive
    ("here", "self", 3600, "abandoned"),  # alive pid, stale heartbeat: the pid was reused
])
def test_listing_checks_pid_on_this_host_and_heartbeat_elsewhere(
        tmp_path: Path, host: str, pid: int | str, age_s: float, status: str) -> None:
    store = Store(tmp_path / "store")
    _running_row(store, host=this_host() if host == "here" else host,
                 pid=os.getpid() if pid == "self" else int(pid), heartbeat_age_s=age_s)
    assert [r.status for r in store.stage_runs("r1")] == [status]


def test_finished_rows_are_listed_as_stored() -> None:
    now = datetime.now(UTC)
    for status in ("ok", "failed"):
        assert listed_status(status, pid=1 << 30, host=this_host(), heartbeat_at=None,
                             started_at=now - timedelta(days=3)) == status


OLD_STAGE_RUNS = """
CREATE TABLE stage_runs (
    stage_run_id VARCHAR PRIMARY KEY, run_id VARCHAR NOT NULL, stage VARCHAR NOT NULL,
    status VARCHAR NOT NULL, snapshot_id VARCHAR, upstream_snapshot_ids VARCHAR[] NOT NULL,
    params JSON NOT NULL, code_version VARCHAR NOT NULL, rows_in BIGINT, rows_out BIGINT,
    meta JSON, started_at TIMESTAMPTZ NOT NULL, ended_at TIMESTAMPTZ, error VARCHAR)
"""


def test_a_catalog_from_before_pids_is_migrated(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.mkdir()
    now = datetime.now(UTC)
    with duckdb.connect(str(root / "catalog.duckdb")) as con:
        con.execute(OLD_STAGE_RUNS)
        for rid, started in (("old", now - timedelta(days=2)), ("new", now)):
            con.execute("insert into stage_runs values (?, ?, 'judge', 'running', null, [], "
                        "'{}', 'v0', null, null, null, ?, null, null)",
                        [f"{rid}:judge", rid, started])
    store = Store(root)
    # Without a pid or heartbeat only the age of the start is left to judge by.
    assert [r.status for r in store.stage_runs("old")] == ["abandoned"]
    assert [r.status for r in store.stage_runs("new")] == ["running"]
    store.start_stage_run("r2", "generate", [], {}, "v1")  # the new columns are there
    [row] = store.stage_runs("r2")
    assert row.pid == os.getpid() and row.host == this_host()
