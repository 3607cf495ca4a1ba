"""A store shared through a part store (``s3://bucket/prefix`` or a folder): ``publish``
uploads it, ``pull`` makes a readable copy of it on any machine.

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
import json
import os
import secrets
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
from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S
from essaybench.store.liveness import this_host
from essaybench.store.lock import exclusive_lock
from essaybench.store.parts import PartExistsError, PartStore, check_rel
from essaybench.store.readonly import read_only
from essaybench.store.store import Store

PREFIX = "store"
LATEST = f"{PREFIX}/catalog/LATEST.json"
CATALOG_FILE = "catalog.duckdb"
LEDGER_FILE = "ledger.duckdb"  # llm.session.LEDGER_FILE (the store layer sits below llm)
PULLED_FILE = "pulled.json"  # in a pulled folder: where it came from
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


class PullResult(TypedDict):
    url: str
    dest: str
    downloaded: int
    skipped: int
    bytes: int
    catalog: str
    ledger: str | None
    published_at: str


@dataclass
class _Counts:
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


# --- publish ---------------------------------------------------------------------------------

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
    counts = _Counts()
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
                  counts: _Counts) -> FileEntry:
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
                      counts: _Counts) -> DatabaseEntry:
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


# --- pull ------------------------------------------------------------------------------------

def pull(parts: PartStore, dest: Path, *,
         lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> PullResult:
    """Make ``dest`` a copy of the store published at ``parts``: download every file it
    lacks or holds other bytes of, then swap in the catalog (and ledger)."""
    manifest = read_manifest(parts)
    if manifest is None:
        raise NotFoundError(f"nothing published at {parts.url} (no {parts.uri(LATEST)}): "
                            f"publish first with essaybench store publish --to {parts.url}")
    _check_dest(dest, parts.url)
    marker = dest / PULLED_FILE
    if not marker.is_file():  # first: a pull that stops half-way can be resumed
        _write_atomically(marker, _json({"from": parts.url}))
    counts = _Counts()

    def fetch(item: tuple[str, FileEntry]) -> None:
        rel, entry = item
        target = dest / rel
        if _up_to_date(target, entry, content_addressed=rel.split("/")[0] in IMMUTABLE):
            counts.skip()
            return
        _write_atomically(target, _download(parts, f"{PREFIX}/{rel}", entry))
        counts.add(entry.bytes)

    with ThreadPoolExecutor(TRANSFERS) as pool:
        list(pool.map(fetch, sorted(manifest.files.items())))  # (list: raises the first error)
    for name, db in ((CATALOG_FILE, manifest.catalog), (LEDGER_FILE, manifest.ledger)):
        if db is None:
            continue
        target = dest / name
        entry = FileEntry(bytes=db.bytes, sha256=db.sha256)
        if _up_to_date(target, entry) and not _wal(target).exists():
            counts.skip()
            continue
        tmp = _write_atomically(target.with_name(f".{name}.pull"),
                                _download(parts, db.path, entry))
        try:  # under the lock a reader of this folder takes: none has the old file open
            with exclusive_lock(target.with_suffix(".lock"), lock_timeout_s):
                _wal(target).unlink(missing_ok=True)  # a WAL belongs to the file it replaces
                os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        counts.add(db.bytes)
    _write_atomically(marker, _json({
        "from": parts.url, "catalog": manifest.catalog.path,
        "ledger": manifest.ledger.path if manifest.ledger else None,
        "published_at": manifest.published_at.isoformat(),
        "pulled_at": datetime.now(UTC).isoformat()}))
    return PullResult(url=parts.url, dest=str(dest), downloaded=counts.done,
                      skipped=counts.skipped, bytes=counts.bytes, catalog=manifest.catalog.path,
                      ledger=manifest.ledger.path if manifest.ledger else None,
                      published_at=manifest.published_at.isoformat())


def _check_dest(dest: Path, url: str) -> None:
    """``dest`` is empty, or a folder pulled from ``url`` before: never a store of its own."""
    if dest.exists() and not dest.is_dir():
        raise UserError(f"{dest} is a file, not a folder")
    marker = dest / PULLED_FILE
    if not marker.is_file():
        if (dest / CATALOG_FILE).exists():
            raise UserError(f"{dest} holds a store of its own (its catalog was not pulled): "
                            "pull into an empty folder or one pulled before")
        return
    try:
        source = json.loads(marker.read_text(encoding="utf-8")).get("from")
    except (ValueError, AttributeError):
        source = None
    if source != url:
        raise UserError(f"{dest} was pulled from {source}, not {url}: pull into another folder")


def _json(obj: dict[str, str | None]) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def _wal(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


def _up_to_date(target: Path, entry: FileEntry, *, content_addressed: bool = False) -> bool:
    if not target.is_file() or target.stat().st_size != entry.bytes:
        return False
    return content_addressed or sha256_hex(target.read_bytes()) == entry.sha256


def _download(parts: PartStore, rel: str, entry: FileEntry) -> bytes:
    data = parts.read_bytes(rel)
    if len(data) != entry.bytes or sha256_hex(data) != entry.sha256:
        raise UserError(f"{parts.uri(rel)} is not the file LATEST.json names (another publish "
                        "is replacing it?): pull again")
    return data


def _write_atomically(target: Path, data: bytes) -> Path:
    """``data`` at ``target``, whole or not at all."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target
