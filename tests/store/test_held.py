"""``Store.hold``: the catalog stays open for a burst of catalog work in this process.
Inside it every connect (any Store of the root, read-only ones and any thread) uses the one
open database and sees what the others wrote; outside it nothing changed; another process
waits for the lock while it lasts and says who holds it."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pytest

from essaybench.core.paths import PROJECT_ROOT
from essaybench.store import Store
from essaybench.store.runs import get_run, record_run

_OTHER_PROCESS = """
import sys
from essaybench.store import Store
from essaybench.store.lock import StoreBusyError
try:
    with Store(sys.argv[1], lock_timeout_s=0.5).connect() as con:
        con.execute("select 1").fetchall()
except StoreBusyError as exc:
    print("busy:", exc)
else:
    print("got it")
"""


def _other_process(root: Path) -> str:
    done = subprocess.run([sys.executable, "-c", _OTHER_PROCESS, str(root)], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=60)
    return done.stdout.strip()


def test_connects_inside_a_hold_open_the_database_once(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "store"
    store = Store(root)
    record_run(store, "r0")  # the catalog exists
    opened: list[str] = []
    real = duckdb.connect

    def counting(*args: object, **kwargs: object) -> duckdb.DuckDBPyConnection:
        opened.append(str(args[0]) if args else "")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(duckdb, "connect", counting)
    with store.hold():
        for i in range(5):
            record_run(Store(root), f"r{i + 1}")  # another Store object, same root
        assert get_run(Store(root, read_only=True), "r3") is not None  # read-only: no deadlock
        seen: list[object] = []
        threads = [threading.Thread(target=lambda: seen.append(get_run(Store(root), "r5")))
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert len(seen) == 4 and all(s is not None for s in seen)
    assert [p for p in opened if p.endswith("catalog.duckdb")] == [str(root / "catalog.duckdb")]
    record_run(store, "r6")  # after the hold: each connect opens the database again
    assert len([p for p in opened if p.endswith("catalog.duckdb")]) > 2
    assert get_run(Store(root, read_only=True), "r6") is not None


def test_an_error_inside_rolls_back_only_its_own_transaction(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    record_run(store, "r0")
    with store.hold():
        with pytest.raises(RuntimeError), store.connect() as con:
            con.execute("delete from runs")
            raise RuntimeError("a stage failed")
        record_run(store, "r1")
    assert get_run(store, "r0") is not None and get_run(store, "r1") is not None


def test_another_process_waits_while_the_hold_lasts(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = Store(root)
    record_run(store, "r0")
    with store.hold():
        assert _other_process(root).startswith("busy:")
    assert _other_process(root) == "got it"
