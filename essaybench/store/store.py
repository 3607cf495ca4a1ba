"""Immutable, content-addressed Parquet snapshots and the DuckDB catalog.

Layout under the store root::

    catalog.duckdb              stage runs, snapshots, prompt sets
    catalog.lock                one writer at a time (see lock.py)
    snapshots/<stage>/<snapshot_id>.parquet

A snapshot's id is ``<stage>-<hash>`` where the hash covers the stage name,
the upstream snapshot ids and the rows, so the same computation always lands
on the same file and a rerun that changes nothing writes nothing new.
"""

from __future__ import annotations

import functools
import json
import os
import re
import secrets
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow.parquet as pq

from essaybench.core.contracts import kept_rows
from essaybench.core.errors import NotFoundError, UnknownNameError, UserError
from essaybench.core.hashing import canonical_json
from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S
from essaybench.core.sql import statement
from essaybench.store.attach import attached
from essaybench.store.batches import (
    META_KEY,
    ROW_GROUP_ROWS,
    SNAPSHOT_KEY,
    footer_of,
    temporary_beside,
    write_batches,
)
from essaybench.store.liveness import listed_status, this_host
from essaybench.store.lock import exclusive_lock
from essaybench.store.readonly import older_schema, read_only
from essaybench.store.table_hash import table_hash

__all__ = [
    "META_KEY", "SNAPSHOT_KEY", "Snapshot", "StageRun", "Store", "WrongUpstreamError",
    "new_run_id", "table_hash",
]

_MIGRATED: set[Path] = set()  # catalogs this process has brought up to the schema


class WrongUpstreamError(UserError, ValueError):
    """A stage was handed a snapshot of another stage than its upstream."""


@dataclass(frozen=True)
class Snapshot:
    """One stage's immutable output table (a Parquet file) and its catalog row: the
    stage, the content hash, the snapshots it was computed from and the stage's
    metadata. ``read()`` returns the table."""

    snapshot_id: str
    stage: str
    path: Path
    content_hash: str
    n_rows: int
    upstream_snapshot_ids: tuple[str, ...]
    meta: dict[str, Any]
    created_at: datetime

    def read(self, columns: Sequence[str] | None = None) -> pl.DataFrame:
        """The table, or only ``columns`` of it (those it has)."""
        self._require_file()
        if columns is None:
            return pl.read_parquet(self.path)
        present = pl.read_parquet_schema(self.path)
        return pl.read_parquet(self.path, columns=[c for c in columns if c in present])

    def read_kept(self) -> pl.DataFrame:
        """The rows whose decision is ``kept``, the filter pushed into the scan: the other
        rows' columns (a filter snapshot's dropped raw and normalised texts) are never
        loaded whole."""
        self._require_file()
        return kept_rows(pl.scan_parquet(self.path)).collect()

    def count_kept(self) -> int:
        self._require_file()
        return int(kept_rows(pl.scan_parquet(self.path)).select(pl.len()).collect().item())

    def iter_kept(self, batch_rows: int) -> Iterator[pl.DataFrame]:
        """The kept rows, in order, at most ``batch_rows`` rows of the file read at once
        (at least one batch, maybe empty)."""
        self._require_file()
        schema = pl.read_parquet_schema(self.path)
        yielded = False
        for batch in pq.ParquetFile(self.path).iter_batches(batch_rows):
            frame = pl.from_arrow(batch, schema_overrides=schema)
            assert isinstance(frame, pl.DataFrame)
            yielded = True
            yield kept_rows(frame)
        if not yielded:
            yield pl.DataFrame(schema=schema)

    def _require_file(self) -> None:
        if not self.path.is_file():
            raise FileNotFoundError(f"snapshot {self.snapshot_id} is in the catalog but its "
                                    f"file is missing: {self.path}")

    def require_stage(self, stage: str, reader: str) -> None:
        """A stage reads only its own upstream: ``reader`` names it in the error."""
        if self.stage != stage:
            raise WrongUpstreamError(f"{reader} reads a {stage!r} snapshot, got "
                                     f"{self.snapshot_id}")


@dataclass(frozen=True)
class StageRun:
    run_id: str
    stage: str
    status: str
    snapshot_id: str | None
    rows_in: int | None
    rows_out: int | None
    started_at: datetime
    ended_at: datetime | None
    code_version: str
    error: str | None
    pid: int | None = None  # the process that ran it, on host
    host: str | None = None
    heartbeat_at: datetime | None = None
    meta: dict[str, Any] | None = None  # facts of the run (counts, timings, health)


def new_run_id() -> str:
    """Sortable and readable: UTC time plus a random suffix."""
    return f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


@functools.cache
def _catalog_tables() -> tuple[str, ...]:
    return tuple(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", statement("catalog_schema")))


def _has_catalog_tables(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether every table of catalog_schema.sql exists: one look-up (~0.5 ms) instead of
    its CREATE statements on every use (~1.7 ms)."""
    names = _catalog_tables()
    row = con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = "
                      "current_database() AND table_name IN (SELECT unnest($names))",
                      {"names": list(names)}).fetchone()
    return row is not None and row[0] == len(names)


class Store:
    """A store at ``root``. ``lock_timeout_s``: how long to wait for another process's
    lock (the catalog's; stages pass it on to the call ledger's). ``read_only``: never
    create or change anything, not even a lock file (read-only commands); a missing
    store is a ``NotFoundError`` and writing fails."""

    def __init__(self, root: Path | str, lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S, *,
                 read_only: bool = False) -> None:
        self.root = Path(root)
        self.catalog_path = self.root / "catalog.duckdb"
        self.lock_timeout_s = lock_timeout_s
        self.read_only = read_only

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A catalog connection held under the store's exclusive lock (a read-only
        connection under a shared one, when the store is read-only)."""
        if self.read_only:
            with self._read_only_connection() as con:
                yield con
            return
        self.root.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(self.root / "catalog.lock", self.lock_timeout_s), \
                attached(self.catalog_path) as con:
            if not _has_catalog_tables(con):
                con.execute(statement("catalog_schema"))
            if self.catalog_path not in _MIGRATED:
                con.execute(statement("catalog_migrate"))
                _MIGRATED.add(self.catalog_path)
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    @contextmanager
    def _read_only_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        if not self.root.is_dir():
            raise NotFoundError(f"no store at {self.root}")
        if not self.catalog_path.is_file():
            raise NotFoundError(f"no catalog in {self.root} (not a store?)")
        with read_only(self.catalog_path, self.root / "catalog.lock", "catalog",
                       wait_s=self.lock_timeout_s, attach=True) as con:
            try:
                yield con
            except (duckdb.CatalogException, duckdb.BinderException) as exc:
                if not older_schema(exc):  # e.g. a negative LIMIT: not the catalog's age
                    raise
                # A catalog from before a table or column was added; a writer migrates it.
                raise UserError(f"catalog {self.catalog_path} was written by an older "
                                "essaybench: a command that writes the store (e.g. essaybench "
                                "curate) brings it up to date") from exc

    # -- snapshots ---------------------------------------------------------

    def write_snapshot(
        self,
        stage: str,
        table: pl.DataFrame,
        upstream: Sequence[str] = (),
        meta: dict[str, Any] | None = None,
    ) -> Snapshot:
        meta = meta or {}
        content_hash = table_hash(stage, table, upstream)
        snapshot_id = f"{stage}-{content_hash[:16]}"
        rel = Path("snapshots") / stage / f"{snapshot_id}.parquet"
        path = self.root / rel
        if not path.is_file():
            self._write_parquet_atomically(path, table, snapshot_id, meta)
        return self._record_snapshot(snapshot_id, stage, rel, content_hash, table.height,
                                     upstream, meta)

    def write_snapshot_batches(
        self,
        stage: str,
        batches: Iterable[pl.DataFrame],
        upstream: Sequence[str] = (),
        meta: Callable[[], dict[str, Any]] = dict,
    ) -> Snapshot:
        """``write_snapshot`` for a table that comes a batch at a time (never held whole;
        the same id as the whole table would get). ``meta`` is asked for after the last
        batch."""
        written = write_batches(self.root, stage, batches, upstream, meta)
        return self._record_snapshot(written.snapshot_id, stage, written.rel,
                                     written.content_hash, written.rows, upstream,
                                     written.meta)

    def _record_snapshot(self, snapshot_id: str, stage: str, rel: Path, content_hash: str,
                         n_rows: int, upstream: Sequence[str], meta: dict[str, Any]
                         ) -> Snapshot:
        created = datetime.now(UTC)
        with self.connect() as con:  # one catalog connection (~20 ms each) for both
            con.execute(statement("insert_snapshot"), {
                "snapshot_id": snapshot_id, "stage": stage, "path": str(rel),
                "content_hash": content_hash, "n_rows": n_rows,
                "upstream_snapshot_ids": list(upstream), "meta": canonical_json(meta),
                "created_at": created,
            })
            row = con.execute(statement("get_snapshot"), {"snapshot_id": snapshot_id}).fetchone()
        return self._snapshot(snapshot_id, row)

    @staticmethod
    def _write_parquet_atomically(
        path: Path, table: pl.DataFrame, snapshot_id: str, meta: dict[str, Any]
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        arrow = table.to_arrow()
        arrow = arrow.replace_schema_metadata({**(arrow.schema.metadata or {}),
                                               **footer_of(snapshot_id, meta)})
        with temporary_beside(path.parent) as tmp:
            # row groups of ROW_GROUP_ROWS, as streamed snapshots have: a reader in batches
            # (Snapshot.iter_kept) holds one group, not the whole file
            pq.write_table(arrow, tmp, row_group_size=ROW_GROUP_ROWS)
            os.replace(tmp, path)  # atomic: readers never see a half-written snapshot

    def get_snapshot(self, snapshot_id: str) -> Snapshot:
        with self.connect() as con:
            row = con.execute(statement("get_snapshot"), {"snapshot_id": snapshot_id}).fetchone()
        return self._snapshot(snapshot_id, row)

    def _snapshot(self, snapshot_id: str, row: tuple[Any, ...] | None) -> Snapshot:
        if row is None:
            raise UnknownNameError(f"no snapshot {snapshot_id!r} in the catalog "
                                   f"{self.catalog_path}")
        sid, stage, rel, chash, n_rows, upstream, meta, created = row
        return Snapshot(sid, stage, self.root / rel, chash, int(n_rows), tuple(upstream),
                        json.loads(meta) if meta else {}, created)

    def latest_ok_snapshot(self, stage: str, run_id: str | None = None) -> Snapshot | None:
        with self.connect() as con:
            row = con.execute(statement("latest_ok_stage_run"),
                              {"stage": stage, "run_id": run_id}).fetchone()
        return None if row is None else self.get_snapshot(row[1])

    def require_ok_snapshot(self, stage: str, run_id: str | None, reader: str, hint: str = "",
                            error: type[LookupError] = NotFoundError) -> Snapshot:
        """``latest_ok_snapshot``, or ``error`` naming the reader, the stage and where it
        looked (and ``hint``: what to run first)."""
        found = self.latest_ok_snapshot(stage, run_id)
        if found is None:
            where = f"run {run_id} of {self.root}" if run_id else f"store {self.root}"
            raise error(f"{reader}: no successful {stage!r} snapshot in {where}"
                        + (f"; {hint}" if hint else ""))
        return found

    def lineage(self, snapshot_id: str) -> dict[str, Snapshot]:
        """Every snapshot this one was computed from, by stage, itself included."""
        found: dict[str, Snapshot] = {}
        todo = [snapshot_id]
        while todo:
            snap = self.get_snapshot(todo.pop())
            found.setdefault(snap.stage, snap)
            todo.extend(snap.upstream_snapshot_ids)
        return found

    # -- stage runs --------------------------------------------------------

    def start_stage_run(
        self, run_id: str, stage: str, upstream: Sequence[str], params: dict[str, Any],
        code_version: str, rows_in: int | None = None,
    ) -> str:
        stage_run_id = f"{run_id}:{stage}:{secrets.token_hex(3)}"
        with self.connect() as con:
            con.execute(statement("start_stage_run"), {
                "stage_run_id": stage_run_id, "run_id": run_id, "stage": stage,
                "upstream_snapshot_ids": list(upstream), "params": canonical_json(params),
                "code_version": code_version, "rows_in": rows_in,
                "started_at": datetime.now(UTC), "pid": os.getpid(), "host": this_host(),
            })
        return stage_run_id

    def heartbeat_stage_run(self, stage_run_id: str) -> None:
        """The stage run is still being computed (see liveness.py)."""
        with self.connect() as con:
            con.execute(statement("heartbeat_stage_run"),
                        {"stage_run_id": stage_run_id, "heartbeat_at": datetime.now(UTC)})

    def finish_stage_run(
        self, stage_run_id: str, *, status: str, snapshot_id: str | None = None,
        rows_in: int | None = None, rows_out: int | None = None,
        meta: dict[str, Any] | None = None, error: str | None = None,
    ) -> None:
        with self.connect() as con:
            con.execute(statement("finish_stage_run"), {
                "stage_run_id": stage_run_id, "status": status, "snapshot_id": snapshot_id,
                "rows_in": rows_in, "rows_out": rows_out,
                "meta": canonical_json(meta) if meta is not None else None,
                "ended_at": datetime.now(UTC), "error": error,
            })

    def stage_runs(self, run_id: str | None = None, limit: int = 100) -> list[StageRun]:
        with self.connect() as con:
            rows = con.execute(statement("list_stage_runs"),
                               {"run_id": run_id, "limit": limit}).fetchall()
        # A running row whose process is gone is shown as abandoned (liveness.py).
        return [StageRun(r[0], r[1], listed_status(r[2], pid=r[10], host=r[11],
                                                   heartbeat_at=r[12], started_at=r[6]),
                         r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12],
                         json.loads(r[13]) if r[13] else None)
                for r in rows]

    # -- prompt sets -------------------------------------------------------

    def record_prompt_set(self, record: dict[str, Any]) -> None:
        with self.connect() as con:
            con.execute(statement("insert_prompt_set"), {
                **record, "counts": canonical_json(record["counts"]),
                "funnel": canonical_json(record["funnel"]),
                "created_at": datetime.now(UTC),
            })

    def latest_prompt_set_version(self) -> str | None:
        with self.connect() as con:
            row = con.execute(statement("latest_prompt_set")).fetchone()
        return None if row is None else str(row[0])

    def get_prompt_set(self, version: str) -> dict[str, Any] | None:
        with self.connect() as con:
            cur = con.execute(statement("get_prompt_set"), {"version": version})
            row = cur.fetchone()
            names = [d[0] for d in cur.description] if cur.description else []
        if row is None:
            return None
        record = dict(zip(names, row, strict=True))
        record["counts"] = json.loads(record["counts"])
        record["funnel"] = json.loads(record["funnel"])
        return record
