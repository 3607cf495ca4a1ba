"""The catalog attached to one in-process DuckDB instance per use (store/attach.py): each
use sees the file as its default database, leaves nothing open behind it (another process
opens the file for writing right after), readers in several threads share one read-only
attachment, and a use nested inside a writer's is refused instead of opening the file
twice."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pytest

from essaybench.store import attach
from essaybench.store.attach import attached


def _other_process(db: Path, sql: str) -> str:
    code = ("import duckdb, sys; con = duckdb.connect(sys.argv[1]); "
            "print(con.execute(sys.argv[2]).fetchall()); con.close()")
    proc = subprocess.run([sys.executable, "-c", code, str(db), sql],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_use_is_the_files_default_database_and_leaves_it_closed(tmp_path: Path) -> None:
    db = tmp_path / "catalog.duckdb"
    with attached(db) as con:
        con.execute("CREATE TABLE t (a INTEGER)")
        con.execute("INSERT INTO t VALUES (1), (2)")
        assert con.execute("SELECT current_database()").fetchone() != ("memory",)
    assert not attach._the_hub().attached
    assert not db.with_suffix(".duckdb.wal").exists()  # checkpointed when detached
    # another process writes to it: neither DuckDB's file lock nor a WAL is left behind
    assert _other_process(db, "INSERT INTO t VALUES (3) RETURNING a") == "[(3,)]"
    with attached(db, read_only=True) as con:
        assert con.execute("SELECT sum(a) FROM t").fetchone() == (6,)
        with pytest.raises(duckdb.Error):
            con.execute("INSERT INTO t VALUES (4)")


def test_two_files_in_use_at_once_each_see_their_own_tables(tmp_path: Path) -> None:
    one, two = tmp_path / "one.duckdb", tmp_path / "two.duckdb"
    with attached(one) as con:
        con.execute("CREATE TABLE only_in_one (a INTEGER)")
    with attached(one, read_only=True) as a, attached(two) as b:
        b.execute("CREATE TABLE only_in_two (a INTEGER)")
        sql = ("SELECT table_name FROM information_schema.tables "
               "WHERE table_catalog = current_database()")
        assert a.execute(sql).fetchall() == [("only_in_one",)]
        assert b.execute(sql).fetchall() == [("only_in_two",)]


def test_readers_in_threads_share_one_attachment(tmp_path: Path) -> None:
    db = tmp_path / "catalog.duckdb"
    with attached(db) as con:
        con.execute("CREATE TABLE t AS SELECT range AS a FROM range(1000)")
    inside, release = threading.Barrier(4), threading.Event()
    sums: list[object] = []

    def read() -> None:
        with attached(db, read_only=True) as con:
            inside.wait(timeout=30)
            release.wait(timeout=30)
            sums.append(con.execute("SELECT sum(a) FROM t").fetchone())

    threads = [threading.Thread(target=read) for _ in range(3)]
    for thread in threads:
        thread.start()
    inside.wait(timeout=30)  # all three readers hold the file at once
    [held] = attach._the_hub().attached.values()
    assert (held.users, held.read_only) == (3, True)
    release.set()
    for thread in threads:
        thread.join(timeout=30)
    assert sums == [(499500,)] * 3
    assert not attach._the_hub().attached


def test_a_use_nested_in_a_writers_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "catalog.duckdb"
    with attached(db), pytest.raises(RuntimeError, match="already open for writing"), \
            attached(db, read_only=True):
        pass
    with attached(db, read_only=True), pytest.raises(RuntimeError, match="open read-only"), \
            attached(db):
        pass
    assert not attach._the_hub().attached  # the refused use left nothing attached
