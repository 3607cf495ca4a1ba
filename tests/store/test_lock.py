"""Waiting for a store's lock says who holds it (pid, host, command) and for how long,
while waiting and when giving up; the lock timeout reaches the call ledger's lock too
(issue 13: a run waiting 120 s for a store lock said nothing; the timeout had no option)."""

from __future__ import annotations

import importlib
import inspect
import logging
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import polars as pl
import pytest

from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.core.paths import PROJECT_ROOT
from essaybench.stages.pipeline import run_stages
from essaybench.store import Store, StoreBusyError
from essaybench.store.lock import LockHolder, exclusive_lock, read_holder

_HOLD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from essaybench.store.lock import exclusive_lock
    with exclusive_lock(Path(sys.argv[1]), 5):
        print("locked", flush=True)
        time.sleep(60)
    """)


class Holds(Protocol):
    """What the ``hold`` fixture gives: ``lock`` has another process take a lock."""

    def lock(self, path: Path) -> int: ...


@pytest.fixture
def hold() -> Iterator[Holds]:
    procs: list[subprocess.Popen[str]] = []

    class Hold:
        @staticmethod
        def lock(path: Path) -> int:
            """Another process takes ``path``'s lock (as a writer does); its pid."""
            proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(path), "--as-a-writer"],
                                    stdout=subprocess.PIPE, text=True, cwd=PROJECT_ROOT)
            procs.append(proc)
            assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
            return proc.pid

    yield Hold
    for proc in procs:
        proc.kill()
        proc.wait(timeout=30)


def test_the_holder_writes_who_it_is_and_since_when(tmp_path: Path) -> None:
    lock = tmp_path / "catalog.lock"
    with exclusive_lock(lock, 1):
        holder = read_holder(lock)
        assert holder is not None and holder.pid is not None and holder.since is not None
        assert holder.command and holder.host
    assert read_holder(lock) is None  # released: nobody holds it
    lock.write_text("pid 42", encoding="utf-8")  # as an earlier version wrote it
    assert read_holder(lock) == LockHolder(pid=42)


def test_a_writer_says_who_holds_the_lock_while_it_waits_and_when_it_gives_up(
        tmp_path: Path, hold: Holds, caplog: pytest.LogCaptureFixture) -> None:
    pid = hold.lock(tmp_path / "catalog.lock")
    holder = f"process pid {pid} (-c {tmp_path / 'catalog.lock'} --as-a-writer)"
    caplog.set_level(logging.INFO, logger="essaybench.store.lock")
    started = time.monotonic()
    with pytest.raises(StoreBusyError) as busy:
        Store(tmp_path, lock_timeout_s=2.5).write_snapshot("collect", pl.DataFrame({"a": [1]}))
    assert 2.5 <= time.monotonic() - started < 10
    assert str(busy.value).startswith(f"store {tmp_path} is busy: {holder} has held its lock "
                                      "(catalog.lock) for ")
    assert str(busy.value).endswith("; gave up after 2.5 s: wait for it to finish or pass a "
                                    "longer --lock-timeout")
    waits = [r.getMessage() for r in caplog.records]
    assert waits and all(m.startswith(f"waiting for the lock of store {tmp_path} "
                                      f"(catalog.lock): {holder} has held it for ")
                         for m in waits), waits
    assert waits[0].endswith("; waited 1.0 s of 2.5 s (--lock-timeout)")


def test_a_short_wait_says_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="essaybench.store.lock")
    Store(tmp_path).write_snapshot("collect", pl.DataFrame({"a": [1]}))
    assert not caplog.records


def test_the_stages_wait_for_the_ledger_as_long_as_for_the_catalog(tmp_path: Path,
                                                                   hold: Holds) -> None:
    """The store's lock timeout is the call ledger's (open_gateway's ledger_lock_timeout_s):
    it used to be 120 s whatever the store's."""
    store = Store(tmp_path / "store", lock_timeout_s=1.0)
    store.stage_runs()
    pid = hold.lock(store.root / "ledger.lock")
    config = BenchmarkConfig(generate=GenerateParams(models=("writer",)),
                             judge=JudgeParams(judges=["judge"]))
    started = time.monotonic()
    with pytest.raises(StoreBusyError, match=rf"process pid {pid} .* \(ledger\.lock\)"):
        run_stages(store, "r1", config, ["generate"], None)
    assert time.monotonic() - started < 20


# Not flows: modules whose names start with "_"; pipeline_shard never opens the store (a
# shard reads and writes only its run's parts: essaybench.stages.shard); batch_wait holds
# the helpers a waiting pipeline run suspends with, batch_resume only resumes flow runs.
FLOWS = sorted(p.stem for p in (PROJECT_ROOT / "flows").glob("*.py")
               if not p.stem.startswith("_")
               and p.stem not in {"pipeline_shard", "batch_wait", "batch_resume"})


@pytest.mark.parametrize("name", FLOWS)
def test_every_flow_that_opens_the_store_takes_a_lock_timeout(name: str) -> None:
    """A deployment (or the CLI's --lock-timeout) can set how long its run waits."""
    module = importlib.import_module(f"essaybench.flows.{name}")
    flow = getattr(module, f"{name}_flow")
    params = inspect.signature(flow.fn).parameters
    assert "store_root" in params
    assert params["lock_timeout_s"].default == 120.0
