"""A store published to a part store (a local folder, and S3 on a real moto server on
loopback) and pulled into a fresh folder is the same store: the same files, the same
catalog (and ledger); a second publish sends only what is new; the catalog is copied
while no writer has it, waiting for one as the store does elsewhere."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import polars as pl
import pytest

from essaybench.llm.session import LEDGER_FILE
from essaybench.store import Store, StoreBusyError
from essaybench.store.parts import PartStore
from essaybench.store.publish import LEDGER_FILE as PUBLISHED_LEDGER_FILE
from essaybench.store.publish import publish, read_manifest
from essaybench.store.pull import PULLED_FILE, pull
from essaybench.store.readonly import read_only
from tests.cli.test_errors import files_of
from tests.store.conftest import Target

SHARED = ("snapshots", "reports", "prompt_sets")


def shared_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for top in SHARED
            for p in sorted((root / top).rglob("*")) if p.is_file()}


def tables(db: Path, lock: str) -> dict[str, pl.DataFrame]:
    """Every table's rows, sorted (read as a reader does: WAL included)."""
    with read_only(db, db.with_name(lock), "db") as con:
        names = [n for (n,) in con.execute(
            "SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
        return {n: con.sql(f"SELECT * FROM {n} ORDER BY ALL").pl() for n in names}


def assert_same_tables(a: dict[str, pl.DataFrame], b: dict[str, pl.DataFrame]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].equals(b[name]), name


def test_pull_gives_the_store_that_was_published(store: Store, target: Target,
                                                 tmp_path: Path) -> None:
    before = files_of(store.root)
    result = publish(store, target(), with_ledger=True)
    assert files_of(store.root) == before  # publishing changes nothing in the store
    n_files = len(shared_files(store.root))
    assert n_files > 10 and result["missing"] == []
    assert (result["uploaded"], result["skipped"]) == (n_files + 2, 0)  # + catalog, ledger
    assert result["catalog"].startswith("store/catalog/")
    assert result["ledger"] is not None and result["ledger"].startswith("store/ledger/")

    dest = tmp_path / "elsewhere" / "store"
    pulled = pull(target(), dest)  # another machine
    assert (pulled["downloaded"], pulled["skipped"]) == (n_files + 2, 0)
    assert shared_files(dest) == shared_files(store.root)
    assert_same_tables(tables(dest / "catalog.duckdb", "catalog.lock"),
                       tables(store.catalog_path, "catalog.lock"))
    assert_same_tables(tables(dest / LEDGER_FILE, "ledger.lock"),
                       tables(store.root / LEDGER_FILE, "ledger.lock"))
    # The pulled folder is a store its readers read, snapshots included.
    copy = Store(dest, read_only=True)
    assert copy.stage_runs() == store.stage_runs()
    judged = store.latest_ok_snapshot("judge", "r1")
    assert judged is not None
    assert copy.get_snapshot(judged.snapshot_id).read().equals(judged.read())
    assert copy.latest_prompt_set_version() == store.latest_prompt_set_version()
    assert (dest / PULLED_FILE).is_file() and not (dest / "catalog.duckdb.wal").exists()


def test_the_ledger_copy_holds_what_its_wal_held(store: Store, tmp_path: Path) -> None:
    """The ledger never checkpoints when it closes: its last calls are in the WAL, which a
    byte copy of ledger.duckdb would lose."""
    assert LEDGER_FILE == PUBLISHED_LEDGER_FILE
    ledger = store.root / LEDGER_FILE
    con = duckdb.connect(str(ledger))
    con.execute("PRAGMA disable_checkpoint_on_shutdown")
    con.execute("CREATE TABLE wal_only AS SELECT 42 AS answer")
    con.close()
    assert ledger.with_name(LEDGER_FILE + ".wal").is_file()
    publish(store, PartStore(tmp_path / "shared"), with_ledger=True)
    pull(PartStore(tmp_path / "shared"), tmp_path / "pulled")
    pulled = tables(tmp_path / "pulled" / LEDGER_FILE, "ledger.lock")
    assert pulled["wal_only"]["answer"].to_list() == [42]
    assert_same_tables(pulled, tables(ledger, "ledger.lock"))


def test_a_second_publish_sends_only_what_is_new(store: Store, target: Target,
                                                 tmp_path: Path) -> None:
    first = publish(store, target())
    n_files = len(shared_files(store.root))
    again = publish(store, target())
    assert (again["uploaded"], again["skipped"], again["bytes"]) == (0, n_files + 1, 0)
    assert again["catalog"] == first["catalog"]  # same content: the same catalog copy
    dest = tmp_path / "pulled"
    pull(target(), dest)

    # A new snapshot (and its catalog row), a rewritten report, a new report.
    new = store.write_snapshot("collect", pl.DataFrame({"text": ["新的一篇"]}))
    (store.root / "reports" / "r1" / "table5.md").write_text("| 模型 | 分数 |\n| a | 1 |\n",
                                                              "utf-8")
    (store.root / "reports" / "r1" / "alerts.md").write_text("无\n", "utf-8")
    third = publish(store, target())
    assert (third["uploaded"], third["skipped"]) == (4, n_files - 1)
    assert third["catalog"] != first["catalog"]
    assert third["ledger"] is None

    pulled = pull(target(), dest)
    assert (pulled["downloaded"], pulled["skipped"]) == (4, n_files - 1)
    assert shared_files(dest) == shared_files(store.root)
    assert Store(dest, read_only=True).get_snapshot(new.snapshot_id).read().equals(new.read())
    assert pull(target(), dest)["downloaded"] == 0


def test_a_ledger_published_once_stays_named(store: Store, tmp_path: Path) -> None:
    parts = PartStore(tmp_path / "shared")
    with_ledger = publish(store, parts, with_ledger=True)
    store.write_snapshot("collect", pl.DataFrame({"text": ["又一篇"]}))
    later = publish(store, parts)
    assert later["ledger"] == with_ledger["ledger"]
    assert pull(parts, tmp_path / "pulled")["ledger"] == with_ledger["ledger"]


HOLD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from essaybench.store.lock import exclusive_lock
    with exclusive_lock(Path(sys.argv[1]), 5):
        print("locked", flush=True)
        time.sleep(float(sys.argv[2]))
    """)


def hold_lock(lock: Path, seconds: float) -> subprocess.Popen[str]:
    """Another process holds ``lock`` as a writer does, for ``seconds``."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(lock), str(seconds)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_publish_waits_for_a_writer_and_says_who_when_it_gives_up(
        store: Store, tmp_path: Path) -> None:
    parts = PartStore(tmp_path / "shared")
    proc = hold_lock(store.root / "catalog.lock", 2.0)
    try:
        with pytest.raises(StoreBusyError) as busy:
            publish(Store(store.root, 0.3, read_only=True), parts)
        assert str(busy.value).startswith(f"catalog {store.catalog_path} is being written: "
                                          f"process pid {proc.pid} ")
        assert "gave up after 0.3 s" in str(busy.value)
        assert read_manifest(parts) is None
        started = time.monotonic()
        publish(Store(store.root, 30, read_only=True), parts)  # waits for the writer
        assert 0.5 < time.monotonic() - started < 10
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert read_manifest(parts) is not None
