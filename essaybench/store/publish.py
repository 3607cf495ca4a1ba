"""A store shared through a part store (``s3://bucket/prefix`` or a folder): ``publish``
uploads it, ``pull`` (``essaybench.store.pull``) makes a readable copy of it on any machine.

Layout below the part store's root::

    store/snapshots/<stage>/<id>.parquet      content-addressed, never replaced: uploaded once
    store/prompt_sets/<version>/...           uploaded again when their bytes change
    store/reports/<run>/...                   rewritten by reruns: uploaded again when changed
    store/catalog/<UTC time>-<hash>.duckdb    a consistent copy of the catalog, never replaced
    store/ledger/<UTC time>-<hash>.duckdb     the call ledger, the same way (``with_ledger``)
    store/catalog/LATEST.json                 the manifest: the catalog (and ledger) to read and
                                              every file, with its size and SHA-256

A DuckDB file is not copied byte by byte: a writer may have it open, and a writer that
does not checkpoint (the ledger) keeps part of it in a ``.wal`` beside it. ``publish``
takes the shared side of the lock every writer takes exclusively (``readonly.read_only``),
so no writer has the file open, and lets DuckDB write the copy (ATTACH ... READ_ONLY, then
COPY FROM DATABASE into a new file), WAL included. The copy's name carries a hash of its
content (every table's definition and sorted rows), since two copies of the same content
differ in their bytes: an unchanged catalog is not uploaded again.

Order makes the shared copy consistent: the catalog is copied first, then every file is
uploaded (the catalog names only files written before its rows), then the catalog copy,
and LATEST.json last. A reader that follows LATEST.json finds every file it names; files
are downloaded before the catalog is swapped in. A pulled folder is read as any store is
(``--store DIR``); its ``pulled.json`` says where it came from.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, TypedDict

import duckdb
import polars as pl
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from essaybench.core.errors import NotFoundError, UserError
from essaybench.core.hashing import sha256_hex
from essaybench.store.liveness import this_host
from essaybench.store.parts import PartExistsError, PartStore, check_rel
from essaybench.store.readonly import read_only
from essaybench.store.store import Store

PREFIX = "store"
LATEST = f"{PREFIX}/catalog/LATEST.json"
CATALOG_FILE = "catalog.duckdb"
LEDGER_FILE = "ledger.duckdb"  # llm.session.LEDGER_FILE (the store layer sits below llm)
IMMUTABLE = ("snapshots",)  # content-addressed: a name never gets other bytes
REWRITTEN = ("prompt_sets", "reports")  # compared by SHA-256, replaced when changed
TRANSFERS = 8  # files sent or fetched at once
_HASH_BATCH_ROWS = 10_000


class FileEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    bytes: int
    sha256: str


class DatabaseEntry(BaseModel):
    """A DuckDB copy: its part path, content hash (tables and sorted rows), bytes' hash."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str
    content_hash: str
    sha256: str
    bytes: int
    published_at: datetime

    @field_validator("path")
    @classmethod
    def _published_database(cls, path: str) -> str:
        if not (check_rel(path).startswith(f"{PREFIX}/") and path.endswith(".duckdb")):
            raise ValueError(f"{path!r} is not a published database")
        return path


class Manifest(BaseModel):
    """LATEST.json. ``files``: paths relative to the store root (below ``store/``)."""

    model_config = ConfigDict(extra="forbid")
    format: Literal[1] = 1
    published_at: datetime
    host: str
    catalog: DatabaseEntry
    ledger: DatabaseEntry | None = None  # carried over from an earlier publish when not sent
    files: dict[str, FileEntry]

    @field_validator("files")
    @classmethod
    def _store_files_only(cls, files: dict[str, FileEntry]) -> dict[str, FileEntry]:
        for rel in files:  # a pull writes these paths below its folder: nothing else
            if check_rel(rel).split("/")[0] not in (*IMMUTABLE, *REWRITTEN):
                raise ValueError(f"{rel!r} is not a store file")
        return files


class PublishResult(TypedDict):
    url: str
    uploaded: int  # files and databases sent
    skipped: int  # already there, unchanged
    bytes: int  # sent
    catalog: str  # part path of the catalog LATEST.json names
    ledger: str | None
    missing: list[str]  # files the catalog names that the store does not have


@dataclass
class Counts:
    """Files sent or fetched, skipped, and bytes moved, counted from several threads."""

    done: int = 0
    skipped: int = 0
    bytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, size: int) -> None:
        with self._lock:
            self.done += 1
            self.bytes += size

    def skip(self) -> None:
        with self._lock:
            self.skipped += 1


def publish(store: Store, parts: PartStore, *, with_ledger: bool = False) -> PublishResult:
    """Upload what ``parts`` does not have yet of ``store`` and point LATEST.json at its
    catalog. Changes nothing in the store; waits ``store.lock_timeout_s`` for a writer."""
    if not store.root.is_dir():
        raise NotFoundError(f"no store at {store.root}")
    if not store.catalog_path.is_file():
        raise NotFoundError(f"no catalog in {store.root} (not a store?)")
    ledger_path = store.root / LEDGER_FILE
    if with_ledger and not ledger_path.is_file():
        raise NotFoundError(f"no ledger at {ledger_path}: no LLM call has been made yet")
    before = read_manifest(parts)
    counts = Counts()
    with tempfile.TemporaryDirectory(prefix="essaybench-publish-") as tmp:
        catalog = _copy_database(store.catalog_path, "catalog", Path(tmp) / CATALOG_FILE,
                                 store.lock_timeout_s)
        ledger = (_copy_database(ledger_path, "call ledger", Path(tmp) / LEDGER_FILE,
                                 store.lock_timeout_s) if with_ledger else None)
        found = list(_store_files(store.root))
        with ThreadPoolExecutor(TRANSFERS) as pool:  # object storage: latency-bound
            entries = pool.map(lambda item: _publish_file(
                parts, item[0], item[1], before.files.get(item[0]) if before else None,
                counts), found)
            files = dict(zip((rel for rel, _ in found), entries, strict=True))
        catalog_entry = _publish_database(parts, "catalog", catalog,
                                          before.catalog if before else None, counts)
        ledger_before = before.ledger if before else None
        ledger_entry = ledger_before if ledger is None else _publish_database(
            parts, "ledger", ledger, ledger_before, counts)
        missing = sorted(set(_named_files(catalog.path)) - set(files))
    now = datetime.now(UTC)
    manifest = Manifest(published_at=now, host=this_host(), catalog=catalog_entry,
                        ledger=ledger_entry, files=files)
    parts.put_json(LATEST, manifest.model_dump(mode="json"))
    return PublishResult(url=parts.url, uploaded=counts.done, skipped=counts.skipped,
                         bytes=counts.bytes, catalog=catalog_entry.path,
                         ledger=ledger_entry.path if ledger_entry else None, missing=missing)


def read_manifest(parts: PartStore) -> Manifest | None:
    """The manifest published at ``parts``; None when nothing was."""
    try:
        data = parts.read_json(LATEST)
        return None if data is None else Manifest.model_validate(data)
    except (ValueError, ValidationError) as exc:  # (ValidationError is a ValueError)
        first = str(exc).splitlines()[0]
        raise UserError(f"{parts.uri(LATEST)} is not an essaybench store manifest: {first}"
                        ) from None


def _store_files(root: Path) -> Iterator[tuple[str, Path]]:
    """(path relative to the root, file) of every file to share; a writer's hidden temp
    files aside."""
    for top in (*IMMUTABLE, *REWRITTEN):
        for folder, dirs, names in os.walk(root / top):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(n for n in names if not n.startswith(".")):
                path = Path(folder, name)
                yield path.relative_to(root).as_posix(), path


def _publish_file(parts: PartStore, rel: str, path: Path, before: FileEntry | None,
                  counts: Counts) -> FileEntry:
    immutable = rel.split("/")[0] in IMMUTABLE
    if immutable and before is not None and before.bytes == path.stat().st_size:
        counts.skip()
        return before
    data = path.read_bytes()
    entry = FileEntry(bytes=len(data), sha256=sha256_hex(data))
    if entry == before:
        counts.skip()
        return entry
    key = f"{PREFIX}/{rel}"
    try:
        parts.write_bytes(key, data, overwrite=not immutable)
    except PartExistsError:  # sent by a publish that stopped before its LATEST.json
        counts.skip()
        there = parts.read_bytes(key)  # what a pull gets (the same rows, if not bytes)
        return FileEntry(bytes=len(there), sha256=sha256_hex(there))
    except ValueError as exc:  # a name the part store cannot hold
        raise UserError(f"cannot publish {path}: {exc}") from None
    counts.add(len(data))
    return entry


@dataclass(frozen=True)
class _Copy:
    path: Path
    content_hash: str


def _sql_text(value: str | Path) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _copy_database(src: Path, what: str, dest: Path, wait_s: float) -> _Copy:
    """``src`` copied by DuckDB to ``dest`` while no writer has it open (see the module)."""
    with read_only(src, src.with_suffix(".lock"), what, wait_s=wait_s):
        con = duckdb.connect()
        try:
            con.execute(f"ATTACH {_sql_text(src)} AS src (READ_ONLY)")
            con.execute(f"ATTACH {_sql_text(dest)} AS dst")
            con.execute("COPY FROM DATABASE src TO dst")
        finally:
            con.close()
    con = duckdb.connect(str(dest), read_only=True)
    try:
        return _Copy(dest, _content_hash(con))
    finally:
        con.close()


def _content_hash(con: duckdb.DuckDBPyConnection) -> str:
    """SHA-256 of every table's definition and rows in a fixed order: the same for any two
    copies of the same content (their bytes differ), on any machine (times in UTC)."""
    con.execute("SET TimeZone = 'UTC'")
    digest = hashlib.sha256()
    tables = con.execute("SELECT schema_name, table_name, sql FROM duckdb_tables() "
                         "WHERE database_name = current_database() ORDER BY 1, 2").fetchall()
    for schema, table, sql in tables:
        digest.update(f"{schema}.{table}\n{sql}\n".encode())
        name = ".".join('"' + str(p).replace('"', '""') + '"' for p in (schema, table))
        for batch in con.sql(f"SELECT * FROM {name} ORDER BY ALL").to_arrow_reader(
                _HASH_BATCH_ROWS):
            frame = pl.from_arrow(batch)
            assert isinstance(frame, pl.DataFrame)
            digest.update(frame.write_ndjson().encode())  # one line a row: batches don't show
    return digest.hexdigest()


def _named_files(catalog: Path) -> list[str]:
    """The files the catalog names (snapshots, prompt set exports)."""
    con = duckdb.connect(str(catalog), read_only=True)
    try:
        rows = con.execute("SELECT path FROM snapshots UNION ALL SELECT jsonl_path FROM "
                           "prompt_sets UNION ALL SELECT parquet_path FROM prompt_sets"
                           ).fetchall()
    finally:
        con.close()
    return [Path(p).as_posix() for (p,) in rows]


def _publish_database(parts: PartStore, kind: str, copy: _Copy, before: DatabaseEntry | None,
                      counts: Counts) -> DatabaseEntry:
    if before is not None and before.content_hash == copy.content_hash and parts.exists(
            before.path):
        counts.skip()
        return before
    data = copy.path.read_bytes()
    now = datetime.now(UTC)
    rel = f"{PREFIX}/{kind}/{now:%Y%m%dT%H%M%SZ}-{copy.content_hash[:16]}.duckdb"
    try:
        parts.write_bytes(rel, data)
        counts.add(len(data))
    except PartExistsError:  # the same content, sent this second by another publish
        data = parts.read_bytes(rel)
        counts.skip()
    return DatabaseEntry(path=rel, content_hash=copy.content_hash, sha256=sha256_hex(data),
                         bytes=len(data), published_at=now)
