from __future__ import annotations

import multiprocessing as mp
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import polars as pl
import pytest

from essaybench.store import Store, StoreBusyError


def _table(n: int, tag: str = "x") -> pl.DataFrame:
    return pl.DataFrame({"i": list(range(n)), "text": [f"{tag}{i}中文" for i in range(n)]})


def test_snapshot_roundtrip_and_meta(tmp_path: Path) -> None:
    store = Store(tmp_path)
    snap = store.write_snapshot("filter", _table(3), upstream=["collect-abc"], meta={"k": [1, 2]})
    assert snap.snapshot_id.startswith("filter-")
    assert snap.n_rows == 3 and snap.upstream_snapshot_ids == ("collect-abc",)
    assert snap.read().equals(_table(3))
    assert store.get_snapshot(snap.snapshot_id).meta == {"k": [1, 2]}
    import pyarrow.parquet as pq

    assert b"essaybench.meta" in (pq.read_schema(snap.path).metadata or {})


def test_snapshot_reads_only_the_columns_asked_for_that_it_has(tmp_path: Path) -> None:
    # The publish step's funnel reads decisions only (at 10^6 raw records the collect and
    # filter tables hold gigabytes of text); a column the table lacks is left out.
    store = Store(tmp_path)
    table = pl.DataFrame({"decision": ["kept", "filtered"], "reason": [None, "empty"],
                          "text": ["写一篇作文", ""]})
    snap = store.write_snapshot("filter", table)
    assert snap.read(["decision", "reason", "pii"]).equals(table.select("decision", "reason"))
    assert snap.read().equals(table)


def test_snapshot_is_content_addressed_and_immutable(tmp_path: Path) -> None:
    store = Store(tmp_path)
    a = store.write_snapshot("dedup", _table(5))
    mtime = a.path.stat().st_mtime_ns
    b = store.write_snapshot("dedup", _table(5))
    assert a.snapshot_id == b.snapshot_id and a.path.stat().st_mtime_ns == mtime
    c = store.write_snapshot("dedup", _table(5, tag="y"))
    d = store.write_snapshot("dedup", _table(5), upstream=["other"])
    assert len({a.snapshot_id, c.snapshot_id, d.snapshot_id}) == 3
    with duckdb.connect(str(store.catalog_path)) as con:
        assert con.execute("select count(*) from snapshots").fetchall() == [(3,)]


def test_stage_run_lifecycle_and_latest(tmp_path: Path) -> None:
    store = Store(tmp_path)
    snap = store.write_snapshot("collect", _table(2))
    sr = store.start_stage_run("run1", "collect", [], {"p": 1}, "0.1.0+gabc", rows_in=None)
    assert store.stage_runs("run1")[0].status == "running"
    assert store.latest_ok_snapshot("collect") is None  # a running stage is not a result
    store.finish_stage_run(sr, status="ok", snapshot_id=snap.snapshot_id, rows_in=2, rows_out=2)
    bad = store.start_stage_run("run2", "collect", [], {}, "v")
    store.finish_stage_run(bad, status="failed", error="ValueError: boom")
    runs = {r.run_id: r for r in store.stage_runs()}
    assert runs["run1"].status == "ok" and runs["run1"].rows_out == 2
    assert runs["run2"].status == "failed" and runs["run2"].error == "ValueError: boom"
    latest = store.latest_ok_snapshot("collect")
    assert latest is not None and latest.snapshot_id == snap.snapshot_id
    assert store.latest_ok_snapshot("collect", run_id="run2") is None
    assert store.require_ok_snapshot("collect", "run1", "dedup").snapshot_id == snap.snapshot_id
    with pytest.raises(LookupError, match=r"^dedup: no successful 'collect' snapshot in run "
                                          r"run2 of .*; run collect first$"):
        store.require_ok_snapshot("collect", "run2", "dedup", hint="run collect first")

    class Missing(LookupError):
        pass

    with pytest.raises(Missing, match="no successful 'filter' snapshot in store "):
        store.require_ok_snapshot("filter", None, "dedup", error=Missing)


def test_lineage_follows_upstream(tmp_path: Path) -> None:
    store = Store(tmp_path)
    a = store.write_snapshot("collect", _table(3))
    b = store.write_snapshot("filter", _table(2), [a.snapshot_id])
    c = store.write_snapshot("dedup", _table(1), [b.snapshot_id])
    assert {k: v.snapshot_id for k, v in store.lineage(c.snapshot_id).items()} == {
        "collect": a.snapshot_id, "filter": b.snapshot_id, "dedup": c.snapshot_id}


def test_missing_snapshot_file_is_named(tmp_path: Path) -> None:
    store = Store(tmp_path)
    snap = store.write_snapshot("collect", _table(1))
    snap.path.unlink()
    with pytest.raises(FileNotFoundError, match=snap.snapshot_id):
        store.get_snapshot(snap.snapshot_id).read()
    with pytest.raises(KeyError, match="no snapshot"):
        store.get_snapshot("collect-nope")


_HOLDER = """
import sys, time
from essaybench.store import Store
with Store(sys.argv[1]).connect():
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _hold_lock(root: Path, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(root), str(seconds)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_second_writer_gets_clear_error(tmp_path: Path) -> None:
    proc = _hold_lock(tmp_path, 5)
    try:
        with pytest.raises(StoreBusyError, match=r"is busy: process pid \d+"):
            Store(tmp_path, lock_timeout_s=0.3).write_snapshot("collect", _table(1))
    finally:
        proc.kill()
        proc.wait()


def test_second_writer_waits_for_the_first(tmp_path: Path) -> None:
    proc = _hold_lock(tmp_path, 1.0)
    t0 = time.monotonic()
    snap = Store(tmp_path, lock_timeout_s=30).write_snapshot("collect", _table(1))
    assert time.monotonic() - t0 > 0.5
    assert proc.wait(timeout=10) == 0
    assert snap.read().height == 1


def _writer(root: str, tag: str, n: int) -> None:
    store = Store(root, lock_timeout_s=60)
    for i in range(n):
        snap = store.write_snapshot("collect", _table(i + 1, tag))
        sr = store.start_stage_run(f"run-{tag}", "collect", [], {"i": i}, "v")
        store.finish_stage_run(sr, status="ok", snapshot_id=snap.snapshot_id, rows_out=i + 1)


def test_concurrent_writers_never_corrupt_the_catalog(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), tag, 8)) for tag in "ab"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    store = Store(tmp_path)
    runs = store.stage_runs(limit=100)
    assert len(runs) == 16 and all(r.status == "ok" for r in runs)
    for r in runs:
        assert r.snapshot_id is not None
        assert store.get_snapshot(r.snapshot_id).read().height == r.rows_out


def test_require_stage_names_the_reader_and_the_snapshot(tmp_path: Path) -> None:
    from essaybench.store.store import WrongUpstreamError

    snap = Store(tmp_path).write_snapshot("filter", _table(2), upstream=[])
    snap.require_stage("filter", "dedup")  # the right upstream passes
    with pytest.raises(WrongUpstreamError,
                       match=rf"judge reads a 'generate' snapshot, got {snap.snapshot_id}"):
        snap.require_stage("generate", "judge")


def test_table_hash_is_the_sha256_of_the_header_and_the_rows_as_ndjson() -> None:
    """The hash is streamed as polars writes the rows (several pieces at this size); it
    must equal the hash of the whole text, computed here in one piece."""
    import hashlib
    import json

    from essaybench.store.store import table_hash

    table = pl.DataFrame({"n": list(range(30_000)),
                          "text": [f"第{i}篇\n\"引号\"" * 60 for i in range(30_000)]})
    header = json.dumps({"schema": {"n": "Int64", "text": "String"}, "stage": "s",
                         "upstream": ["a", "b"]}, sort_keys=True, ensure_ascii=False,
                        separators=(",", ":"))
    whole = header.encode() + b"\n" + table.write_ndjson().encode()
    assert len(whole) > 30_000_000  # more than one of polars' ~10 MB writes
    assert table_hash("s", table, ["a", "b"]) == hashlib.sha256(whole).hexdigest()
    assert table_hash("s", table.head(29_999), ["a", "b"]) != table_hash("s", table, ["a", "b"])


def test_a_catalog_missing_a_table_gets_it_on_the_next_use(tmp_path: Path) -> None:
    """The schema's CREATE statements run only when a table is missing (a look-up first):
    a catalog from before a table existed, or one whose table was dropped, gets it back."""
    store = Store(tmp_path / "store")
    with store.connect() as con:
        con.execute("DROP TABLE gold_sets")
    with store.connect() as con:
        tables = {t for (t,) in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = "
            "current_database()").fetchall()}
    assert {"snapshots", "stage_runs", "prompt_sets", "runs", "gold_sets"} <= tables
