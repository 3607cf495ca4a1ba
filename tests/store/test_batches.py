"""A snapshot written a batch at a time (collect and filter stream): the same id and rows
as the whole table written at once, nothing left behind when the stream fails, and the
stage's catalog row counted from the batches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from essaybench.core.contracts import StageOutput, StreamedOutput, kept_rows
from essaybench.store import Store
from essaybench.store.batches import META_KEY, SNAPSHOT_KEY, BatchSchemaError, footer
from essaybench.store.run_stage import StageFailed, run_stage


def _table(n: int) -> pl.DataFrame:
    return pl.DataFrame({
        "record_id": [f"r{i}" for i in range(n)],
        "text": [None if i % 7 == 0 else f"写一篇作文，题目{i}" for i in range(n)],
        "decision": ["kept" if i % 3 else "filtered" for i in range(n)],
        "score": [i / 3 for i in range(n)],
    })


def _slices(table: pl.DataFrame, size: int) -> Iterator[pl.DataFrame]:
    for start in range(0, max(table.height, 1), size):
        yield table.slice(start, size)


@pytest.mark.parametrize("size", [1, 7, 1000])
def test_batches_make_the_snapshot_the_whole_table_makes(tmp_path: Path, size: int) -> None:
    table = _table(50)
    whole = Store(tmp_path / "a").write_snapshot("filter", table, ["collect-x"], {"n": 1})
    streamed = Store(tmp_path / "b").write_snapshot_batches(
        "filter", _slices(table, size), ["collect-x"], lambda: {"n": 1})
    assert streamed.snapshot_id == whole.snapshot_id
    assert streamed.content_hash == whole.content_hash
    assert streamed.n_rows == 50 and streamed.meta == {"n": 1}
    assert streamed.read().equals(table)
    for snap in (streamed, whole):
        assert footer(snap.path)[SNAPSHOT_KEY] == whole.snapshot_id.encode()
        assert footer(snap.path)[META_KEY] == b'{"n":1}'
    assert pq.ParquetFile(streamed.path).num_row_groups == -(-50 // size)


def test_an_empty_batch_is_an_empty_snapshot(tmp_path: Path) -> None:
    empty = _table(3).clear()
    whole = Store(tmp_path / "a").write_snapshot("filter", empty)
    streamed = Store(tmp_path / "b").write_snapshot_batches("filter", iter([empty]))
    assert streamed.snapshot_id == whole.snapshot_id and streamed.read().equals(empty)


def test_the_meta_is_asked_for_after_the_last_batch(tmp_path: Path) -> None:
    meta: dict[str, int] = {}

    def batches() -> Iterator[pl.DataFrame]:
        yield _table(5)
        meta["rows"] = 5  # what a stage knows only at its end

    snap = Store(tmp_path).write_snapshot_batches("filter", batches(), meta=lambda: meta)
    assert snap.meta == {"rows": 5}


def _failing_after_a_batch(error: Exception) -> Iterator[pl.DataFrame]:
    yield _table(5)
    raise error


def test_a_failing_stream_leaves_no_file_and_no_catalog_row(tmp_path: Path) -> None:
    store = Store(tmp_path)
    with pytest.raises(RuntimeError, match="source gone"):
        store.write_snapshot_batches("filter",
                                     _failing_after_a_batch(RuntimeError("source gone")))
    assert not list((tmp_path / "snapshots" / "filter").iterdir())
    assert store.latest_ok_snapshot("filter") is None


def test_batches_of_two_schemas_or_none_at_all_are_refused(tmp_path: Path) -> None:
    store = Store(tmp_path)
    other = _table(3).with_columns(pl.col("score").cast(pl.Int64))
    with pytest.raises(BatchSchemaError, match="yielded a batch of schema"):
        store.write_snapshot_batches("filter", iter([_table(3), other]))
    with pytest.raises(BatchSchemaError, match="no batch"):
        store.write_snapshot_batches("filter", iter([]))
    assert not list((tmp_path / "snapshots" / "filter").iterdir())


def test_a_streamed_stage_is_counted_like_a_whole_one(tmp_path: Path) -> None:
    store = Store(tmp_path)
    table = _table(40)
    streamed = run_stage(store, run_id="r1", stage="filter", upstream=[], params=None,
                         compute=lambda: StreamedOutput(_slices(table, 6), {"m": 2}))
    whole = run_stage(store, run_id="r2", stage="filter", upstream=[], params=None,
                      compute=lambda: StageOutput(table, {"m": 2}))
    assert streamed.snapshot_id == whole.snapshot_id
    one, two = sorted(store.stage_runs(), key=lambda r: r.run_id)
    assert (one.rows_in, one.rows_out, one.status) == (two.rows_in, two.rows_out, "ok")
    assert one.rows_out == kept_rows(table).height
    assert one.meta is not None and two.meta is not None
    assert one.meta["decisions"] == two.meta["decisions"] == {"kept": 26, "filtered": 14}


def test_a_stream_that_fails_fails_its_stage(tmp_path: Path) -> None:
    store = Store(tmp_path)
    failing = _failing_after_a_batch(ValueError("two records share a locator: s line 3"))
    with pytest.raises(StageFailed, match="two records share a locator"):
        run_stage(store, run_id="r1", stage="collect", upstream=[], params=None,
                  compute=lambda: StreamedOutput(failing))
    (run,) = store.stage_runs()
    assert run.status == "failed" and run.snapshot_id is None


@pytest.mark.parametrize("size", [1, 4, 100])
def test_kept_rows_read_whole_in_batches_and_counted_agree(tmp_path: Path, size: int) -> None:
    table = _table(30)
    snap = Store(tmp_path).write_snapshot_batches("filter", _slices(table, 9))
    kept = kept_rows(table)
    assert snap.read_kept().equals(kept)
    assert snap.count_kept() == kept.height
    parts = list(snap.iter_kept(size))
    assert pl.concat(parts).equals(kept)
    assert all(p.schema == table.schema for p in parts)
    none = Store(tmp_path / "e").write_snapshot("filter", table.clear())
    (only,) = list(none.iter_kept(size))
    assert only.height == 0 and only.schema == table.schema


def test_a_snapshot_written_whole_is_read_in_batches_of_bounded_groups(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # pyarrow's default would be one group of up to 1Mi rows: iter_kept would hold it whole
    from essaybench.store import store as store_module

    monkeypatch.setattr(store_module, "ROW_GROUP_ROWS", 8)
    table = _table(30)
    snap = Store(tmp_path).write_snapshot("filter", table)
    parquet = pq.ParquetFile(snap.path)
    assert parquet.num_row_groups == 4
    assert max(parquet.metadata.row_group(i).num_rows for i in range(4)) == 8
    assert pl.concat(list(snap.iter_kept(5))).equals(kept_rows(table))
