"""The part store's contract, the same on a local folder and on S3 (a real moto server on
loopback, started once for the module): round trips, parts never overwritten, a reader
never sees half a part, another instance (another machine) sees what was written, DuckDB
reads a glob of parts, and a user's mistake is one clear line."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from essaybench.core.errors import UserError
from essaybench.store.parts import (
    PARTS_URL_ENV,
    PartExistsError,
    PartNotFoundError,
    PartStore,
)
from ops.local_stack import free_port
from tests.s3_server import TEST_CREDENTIALS, S3Env
from tests.store.conftest import Target

PART = "runs/r1/judge/shard=3/part-0001.parquet"


def _table(n: int = 3, start: int = 0) -> pl.DataFrame:
    return pl.DataFrame({
        "id": list(range(start, start + n)),
        "essay": [f"第{i}篇作文" for i in range(start, start + n)],
        "score": [None if i % 2 else float(i) for i in range(start, start + n)],
    })


# --- round trips -----------------------------------------------------------------------

def test_parquet_round_trip_returns_the_parts_url(target: Target) -> None:
    store = target()
    url = store.write_parquet(PART, _table())
    assert url == store.uri(PART)
    assert url.endswith("/" + PART)
    assert store.exists(PART)
    assert_frame_equal(store.read_parquet(PART), _table())


def test_json_is_utf8_with_sorted_keys_and_none_when_missing(target: Target) -> None:
    store = target()
    assert store.read_json("runs/r1/status.json") is None
    store.write_json("runs/r1/manifest.json", {"b": 1, "a": "议论文"})
    raw = store.read_bytes("runs/r1/manifest.json").decode("utf-8")
    assert "议论文" in raw and raw.index('"a"') < raw.index('"b"')
    assert store.read_json("runs/r1/manifest.json") == {"a": "议论文", "b": 1}
    with pytest.raises(PartExistsError):
        store.write_json("runs/r1/manifest.json", {})


def test_put_json_overwrites(target: Target) -> None:
    store = target()
    store.put_json("runs/r1/heartbeat/shard=1.json", {"beat": 1})
    store.put_json("runs/r1/heartbeat/shard=1.json", {"beat": 2})
    assert target().read_json("runs/r1/heartbeat/shard=1.json") == {"beat": 2}


def test_read_json_of_a_corrupt_file_names_it(target: Target) -> None:
    store = target()
    store.write_bytes("runs/r1/bad.json", b"{not json")
    with pytest.raises(ValueError, match=r"bad\.json: not valid JSON"):
        store.read_json("runs/r1/bad.json")


def test_read_parquets_concatenates_in_the_given_order(target: Target) -> None:
    store = target()
    store.write_parquet("runs/r1/g/a.parquet", _table(2, start=0))
    store.write_parquet("runs/r1/g/b.parquet", _table(2, start=10).with_columns(extra=pl.lit("x")))
    out = store.read_parquets(["runs/r1/g/b.parquet", "runs/r1/g/a.parquet"])
    assert out["id"].to_list() == [10, 11, 0, 1]
    assert out["extra"].to_list() == ["x", "x", None, None]
    assert store.read_parquets([]).is_empty()


def test_a_missing_part_is_a_clear_not_found(target: Target) -> None:
    store = target()
    store.write_parquet("runs/r1/g/a.parquet", _table())
    reads: list[Callable[[], object]] = [
        lambda: store.read_parquet("runs/r1/g/zz.parquet"),
        lambda: store.read_parquets(["runs/r1/g/a.parquet", "runs/r1/g/zz.parquet"])]
    for read in reads:
        with pytest.raises(PartNotFoundError, match="no such part") as err:
            read()
        assert store.uri("runs/r1/g/zz.parquet") in str(err.value)
        assert isinstance(err.value, UserError) and isinstance(err.value, FileNotFoundError)


# --- immutability and atomicity --------------------------------------------------------

def test_a_part_is_never_overwritten(target: Target) -> None:
    store = target()
    store.write_parquet(PART, _table())
    with pytest.raises(PartExistsError, match="immutable") as err:
        target().write_parquet(PART, _table(5))
    assert store.uri(PART) in str(err.value)
    assert_frame_equal(store.read_parquet(PART), _table())


def test_of_writers_racing_for_one_name_exactly_one_wins(target: Target) -> None:
    outcomes: list[str] = []
    barrier = threading.Barrier(4)

    def write(i: int) -> None:
        store = target()
        barrier.wait()
        try:
            store.write_parquet(PART, _table(1, start=i))
            outcomes.append(f"won:{i}")
        except PartExistsError:
            outcomes.append("refused")

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    won = [o for o in outcomes if o.startswith("won")]
    assert len(outcomes) == 4 and len(won) == 1, outcomes
    assert target().read_parquet(PART)["id"].to_list() == [int(won[0].split(":")[1])]


def test_a_reader_sees_a_whole_part_or_nothing(target: Target) -> None:
    store, reader = target(), target()
    data = bytes(range(256)) * (64 * 1024)  # 16 MiB: long enough to watch it being written
    rel = "runs/r1/blob/part-big.bin"
    seen: list[int] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if reader.exists(rel):
                seen.append(len(reader.read_bytes(rel)))
                return
            time.sleep(0.001)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        store.write_bytes(rel, data)
    finally:
        time.sleep(0.05)
        done.set()
        watcher.join(30)
    assert all(n == len(data) for n in seen), seen
    assert reader.read_bytes(rel) == data


def test_local_writes_leave_no_temporary_file(tmp_path: Path) -> None:
    store = PartStore(tmp_path / "parts")
    store.write_parquet(PART, _table())
    store.put_json("runs/r1/status.json", {"s": 1})
    store.put_json("runs/r1/status.json", {"s": 2})
    with pytest.raises(PartExistsError):
        store.write_parquet(PART, _table())
    files = sorted(p.relative_to(store.url).as_posix()
                   for p in Path(store.url).rglob("*") if p.is_file())
    assert files == [PART, "runs/r1/status.json"]


def test_listing_skips_files_being_written(tmp_path: Path) -> None:
    store = PartStore(tmp_path / "parts")
    store.write_parquet(PART, _table())
    # What a writer killed between its temp file and the publish leaves behind.
    (Path(store.uri(PART)).parent / ".part-0002.parquet.0123abcd.tmp").write_bytes(b"half")
    assert store.list("runs/r1", ".parquet") == [PART]
    assert store.list("runs") == [PART]


# --- what is there, seen from another machine -----------------------------------------

def test_list_is_sorted_relative_and_scoped_to_the_folder(target: Target) -> None:
    store = target()
    for rel in ("runs/x/b.parquet", "runs/x/a.parquet", "runs/x/sub/c.parquet",
                "runs/x/notes.json", "runs/xy/d.parquet"):
        store.write_bytes(rel, b"1")
    assert store.list("runs/x", ".parquet") == [
        "runs/x/a.parquet", "runs/x/b.parquet", "runs/x/sub/c.parquet"]
    assert store.list("runs/x") == ["runs/x/a.parquet", "runs/x/b.parquet", "runs/x/notes.json",
                                    "runs/x/sub/c.parquet"]
    assert store.list("runs/x/b.parquet") == []  # a file is not a folder
    assert store.list("runs/nothing") == []
    assert len(store.list("")) == 5


def test_another_instance_sees_new_writes_at_once(target: Target) -> None:
    mine, other = target(), target()
    mine.write_parquet("runs/r1/judge/shard=0/part-a.parquet", _table())
    assert mine.list("runs/r1/judge") == ["runs/r1/judge/shard=0/part-a.parquet"]
    assert not mine.exists("runs/r1/judge/shard=1/part-b.parquet")  # listed, then written:
    other.write_parquet("runs/r1/judge/shard=1/part-b.parquet", _table())  # no stale cache
    assert mine.exists("runs/r1/judge/shard=1/part-b.parquet")
    assert mine.list("runs/r1/judge", ".parquet") == [
        "runs/r1/judge/shard=0/part-a.parquet", "runs/r1/judge/shard=1/part-b.parquet"]


def test_duckdb_reads_a_glob_of_parts_through_register(target: Target) -> None:
    store, other = target(), target()
    for k in range(3):
        store.write_parquet(f"runs/r1/judge/shard={k}/part-{k}.parquet", _table(2, start=10 * k))
    con = duckdb.connect()
    root = store.register(con)
    assert root == store.url
    glob = f"read_parquet('{root}/runs/r1/judge/*/*.parquet')"
    assert con.execute(f"SELECT count(*), sum(id) FROM {glob}").fetchall() == [(6, 63)]
    other.write_parquet("runs/r1/judge/shard=3/part-3.parquet", _table(2, start=30))
    assert other.register(con) == root  # registering again (another instance) is fine
    assert con.execute(f"SELECT count(*) FROM {glob}").fetchall() == [(8,)]
    essays = con.execute(f"SELECT essay FROM {glob} ORDER BY id LIMIT 1").fetchall()
    assert essays == [("第0篇作文",)]


# --- paths and configuration -----------------------------------------------------------

@pytest.mark.parametrize("rel", ["", "/abs/x.parquet", "a/../b", "a//b", "a/", "./a", "a/./b",
                                 ".hidden/x", "a\\b", "runs/*.parquet", "a/[x]"])
def test_bad_part_paths_are_refused(tmp_path: Path, rel: str) -> None:
    store = PartStore(tmp_path)
    for call in (lambda: store.write_parquet(rel, _table()), lambda: store.read_parquet(rel),
                 lambda: store.exists(rel), lambda: store.uri(rel)):
        with pytest.raises(ValueError, match="bad part path"):
            call()
    with pytest.raises(ValueError, match="bad part path"):
        store.list(rel or "a//b")


def test_urls_are_normalised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert PartStore("rel/parts").url == str(tmp_path / "rel" / "parts")
    assert PartStore(f"file://{tmp_path}/p").url == str(tmp_path / "p")
    assert PartStore("s3://bucket/team/store/").url == "s3://bucket/team/store"
    assert PartStore("s3://bucket").uri("a/b.json") == "s3://bucket/a/b.json"
    secret = PartStore("s3://b/p", storage_options={"key": "AKIDSECRETLOOKING", "secret": "s"})
    assert "AKID" not in repr(secret)


def test_for_store_defaults_to_a_local_folder_beside_the_catalog(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PARTS_URL_ENV, raising=False)
    assert PartStore.for_store(tmp_path / "store").url == str(tmp_path / "store" / "parts")
    monkeypatch.setenv(PARTS_URL_ENV, "s3://essaybench/team-store")
    assert PartStore.for_store(tmp_path / "store").url == "s3://essaybench/team-store"


# --- a user's mistakes: one line naming the URL and what is wrong -----------------------

@pytest.mark.parametrize("url, what", [
    ("gs://bucket/x", "unsupported storage scheme 'gs'"),
    ("https://user:hunter2@example.com/x", "unsupported storage scheme 'https'"),
    ("s3://", "no bucket named"),
    ("s3://bucket/a/../b", "bad prefix"),
    ("   ", "URL is empty"),
])
def test_bad_urls(url: str, what: str) -> None:
    with pytest.raises(UserError, match=what) as err:
        PartStore(url)
    assert "hunter2" not in str(err.value) and "\n" not in str(err.value)


def test_a_missing_bucket_is_named(s3: S3Env) -> None:
    store = PartStore("s3://no-such-bucket-here/team")
    for call in (lambda: store.list("runs"), lambda: store.write_json("a.json", {}),
                 lambda: store.read_json("a.json")):
        with pytest.raises(UserError) as err:
            call()
        message = str(err.value)
        assert "s3://no-such-bucket-here/team" in message and s3.endpoint in message
        assert "bucket 'no-such-bucket-here' does not exist" in message
        assert TEST_CREDENTIALS["AWS_SECRET_ACCESS_KEY"] not in message


def test_missing_credentials_are_named(s3: S3Env, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in TEST_CREDENTIALS:
        monkeypatch.delenv(name)
    with pytest.raises(UserError, match="no S3 credentials: set AWS_ACCESS_KEY_ID"):
        PartStore(s3.url()).exists("a.json")


def test_an_unreachable_endpoint_fails_fast_and_clearly(s3: S3Env) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    store = PartStore(s3.url(), storage_options={
        "endpoint_url": endpoint, "key": "AKIDVISIBLE", "secret": "very-secret-value",
        "config_kwargs": {"connect_timeout": 1, "retries": {"max_attempts": 1}}, "retries": 1})
    started = time.monotonic()
    with pytest.raises(UserError, match="cannot reach the S3 endpoint") as err:
        store.list("runs")
    assert time.monotonic() - started < 5
    message = str(err.value)
    assert endpoint in message and s3.url() in message
    assert "very-secret-value" not in message and "AKIDVISIBLE" not in message


def test_the_parts_json_files_are_plain_json_on_disk(tmp_path: Path) -> None:
    store = PartStore(tmp_path)
    store.write_json("a/b.json", {"z": [1, 2], "名": "值"})
    assert json.loads(Path(store.uri("a/b.json")).read_text("utf-8")) == {"z": [1, 2], "名": "值"}
