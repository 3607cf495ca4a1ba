"""The durable call ledger: every finished LLM call, stored before its caller sees it.

Durability: a call's row is committed to DuckDB (whose write-ahead log survives
``kill -9``) before ``record`` returns, so a crash loses at most the calls still in
flight. Rows are group-committed: a commit waits up to ``linger_s`` for company
(or until ``max_batch`` rows), because each DuckDB commit costs ~6 ms of CPU
(measured: 0.74 ms per row in batches of 8, 0.10 ms in batches of 64). The HTTP
slot is already free while a row waits, so the linger costs no throughput, and no
caller is told its call is stored before it is. The linger ends early on
``flush_soon``: the gateway calls it when none of its calls is still in flight, since no
company can come then and waiting would only delay the batch's end and every follow-up
that waits for its parent's commit (a re-ask, an adaptive round).

Each row records the run that paid for the call (``run_id``); look-ups serve only calls
of the runs a :class:`~essaybench.llm.scope.ReuseScope` allows, so a new run makes fresh
calls while a rerun reuses what its lineage already paid for.

One process writes a ledger at a time: the ledger holds the store's lock file for
its lifetime, so a second process waits (up to a timeout) and then gets a clear
``StoreBusyError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from essaybench.core.hashing import canonical_json
from essaybench.core.sql import statement
from essaybench.core.version import code_version
from essaybench.llm.scope import ANY_RUN, ReuseScope
from essaybench.llm.types import CallStatus, ChatResult, Usage
from essaybench.store.lock import exclusive_lock

# The rows as a polars frame: registering it with DuckDB goes through Arrow without
# pyarrow's Python-object conversion, which imports pandas (~0.5 s, at the start of the
# first batch) and costs ~4x the CPU per row.
ROW_SCHEMA: dict[str, pl.DataType] = {
    **dict.fromkeys(("key", "model", "endpoint", "model_id", "returned_model", "stage", "tag",
                     "status", "error_kind", "error", "request", "response_text", "parsed",
                     "finish_reason"), pl.String()),
    "input_tokens": pl.Int64(), "output_tokens": pl.Int64(),
    "cached_input_tokens": pl.Int64(), "cost_usd": pl.Float64(),
    "latency_s": pl.Float64(), "attempts": pl.Int32(),
    "started_at": pl.Datetime("us", "UTC"), "finished_at": pl.Datetime("us", "UTC"),
    "code_version": pl.String(), "run_id": pl.String(),
    "retries": pl.Int32(), "reasks": pl.Int32(), "batched": pl.Boolean(),
}


def ledger_row(result: ChatResult, *, endpoint: str, model_id: str,
               request: str, run_id: str | None = None) -> dict[str, Any]:
    """``request``: the canonical JSON the call's key hashes (``ChatRequest.canonical``);
    ``run_id``: the run that paid for the call (see ``ReuseScope``)."""
    return {
        "key": result.key, "model": result.model, "endpoint": endpoint, "model_id": model_id,
        "returned_model": result.returned_model, "stage": result.stage, "tag": result.tag,
        "status": result.status.value, "error_kind": result.error_kind, "error": result.error,
        "request": request, "response_text": result.text,
        "parsed": None if result.parsed is None else canonical_json(result.parsed),
        "finish_reason": result.finish_reason, "input_tokens": result.usage.input_tokens,
        "output_tokens": result.usage.output_tokens,
        "cached_input_tokens": result.usage.cached_input_tokens, "cost_usd": result.cost_usd,
        "latency_s": result.latency_s, "attempts": result.attempts,
        "started_at": result.started_at, "finished_at": result.finished_at,
        "code_version": code_version(), "run_id": run_id,
        "retries": result.retries, "reasks": result.reasks,
        "batched": True if result.batched else None,  # NULL: a direct call
    }


def result_from_row(row: dict[str, Any]) -> ChatResult:
    return ChatResult(
        key=row["key"], model=row["model"], status=CallStatus(row["status"]),
        text=row["response_text"],
        parsed=None if row["parsed"] is None else json.loads(row["parsed"]),
        returned_model=row["returned_model"], finish_reason=row["finish_reason"],
        usage=Usage(row["input_tokens"], row["output_tokens"], row.get("cached_input_tokens")),
        latency_s=row["latency_s"] or 0,
        cost_usd=row["cost_usd"], attempts=row["attempts"], retries=row.get("retries"),
        reasks=row.get("reasks"), error_kind=row["error_kind"],
        error=row["error"], started_at=row["started_at"], finished_at=row["finished_at"],
        from_ledger=True, stage=row["stage"] or "", tag=row["tag"] or "",
        batched=bool(row.get("batched")),
    )


def rows_frame(rows: Sequence[dict[str, Any]]) -> pl.DataFrame:
    """Ledger rows (``ledger_row``) as a frame of ``ROW_SCHEMA``."""
    return pl.DataFrame({name: [row[name] for row in rows] for name in ROW_SCHEMA},
                        schema=ROW_SCHEMA)


def as_ledger_frame(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` (rows read back from Parquet or exported from a ledger) in ``ROW_SCHEMA``."""
    columns = []
    for name, dtype in ROW_SCHEMA.items():
        if name not in frame.columns:
            columns.append(pl.lit(None, dtype).alias(name))
        elif isinstance(dtype, pl.Datetime):
            col = frame[name]
            if isinstance(col.dtype, pl.Datetime) and col.dtype.time_zone is not None:
                columns.append(pl.col(name).dt.convert_time_zone("UTC").cast(dtype))
            else:
                columns.append(pl.col(name).cast(dtype))
        else:
            columns.append(pl.col(name).cast(dtype))
    return frame.select(columns)


def _named_rows(cur: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description or []]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


class Ledger:
    def __init__(self, path: Path | str, lock_timeout_s: float = 120.0,
                 linger_s: float = 0.2, max_batch: int = 256) -> None:
        self.path = Path(path)
        self.lock_timeout_s = lock_timeout_s
        self.linger_s = linger_s
        self.max_batch = max_batch
        self._batch_ready: asyncio.Event | None = None
        self._stack = contextlib.ExitStack()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._db_lock = threading.Lock()  # one statement at a time on the connection
        self._pending: list[tuple[dict[str, Any], asyncio.Future[None]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self.commits = 0
        # Per run id (None: rows without one), every key that run has a row for: read once
        # on the first run-scoped look-up, kept current by insert_frame (the ledger's only
        # writer while this process holds its lock). A look-up for keys none of its runs
        # has needs no query: a fresh run's ~11k single-essay judge look-ups at paper scale
        # were each a DuckDB join on the event loop's thread.
        self._run_keys: dict[str | None, set[str]] = {}
        self.queries_saved = 0

    # -- lifetime ----------------------------------------------------------

    def open(self) -> Ledger:
        if self._con is not None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._stack.enter_context(exclusive_lock(self.path.with_suffix(".lock"),
                                                 self.lock_timeout_s))
        self._con = duckdb.connect(str(self.path))
        # No checkpoint when the connection closes: after a 20k-call batch it took ~0.8 s,
        # between two stages of a run; the next open replays the WAL in ~0.1 s instead, and
        # DuckDB still checkpoints whenever the WAL passes its size threshold. Durability
        # is the WAL's either way.
        self._con.execute("PRAGMA disable_checkpoint_on_shutdown")
        self._con.execute(statement("ledger_schema"))
        self._con.execute(statement("ledger_add_run_id"))
        self._con.execute(statement("ledger_add_reasks"))
        self._con.execute(statement("ledger_add_cached_input"))
        self._con.execute(statement("ledger_add_batched"))
        return self

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None
        self._run_keys.clear()  # once the lock is let go, another process may write
        self._stack.close()

    def __enter__(self) -> Ledger:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            raise RuntimeError(f"ledger {self.path} is not open")
        return self._con

    # -- reads -------------------------------------------------------------

    def lookup_ok(self, keys: Iterable[str], failed_since: datetime | None = None,
                  scope: ReuseScope = ANY_RUN) -> dict[str, ChatResult]:
        """The newest successful call for each key that has one; with ``failed_since``,
        also the newest failed call of a key without success that finished since then.
        Only calls ``scope`` allows (by the run that paid for them) are looked at."""
        wanted_keys = set(keys)
        params = scope.sql_params()
        with self._db_lock:
            if scope.runs is not None:
                known = [self._keys_of(run) for run in
                         (*sorted(scope.runs), *((None,) if scope.unattributed else ()))]
                wanted_keys = {k for k in wanted_keys if any(k in ks for ks in known)}
                if not wanted_keys:
                    self.queries_saved += 1
                    return {}
            wanted = pl.DataFrame({"key": sorted(wanted_keys)}, schema={"key": pl.String()})
            self.con.register("wanted", wanted)
            try:
                if failed_since is None:
                    cursor = self.con.execute(statement("ledger_lookup_ok"), params)
                else:
                    cursor = self.con.execute(statement("ledger_lookup_settled"),
                                              {**params, "since": failed_since})
                rows = _named_rows(cursor)
            finally:
                self.con.unregister("wanted")
        return {r["key"]: result_from_row(r) for r in rows}

    def _keys_of(self, run_id: str | None) -> set[str]:
        """The keys run ``run_id`` has rows for (call with ``_db_lock`` held)."""
        found = self._run_keys.get(run_id)
        if found is None:
            rows = self.con.execute(statement("ledger_run_keys"), {"run_id": run_id})
            found = self._run_keys[run_id] = {str(k) for (k,) in rows.fetchall()}
        return found

    def export_runs(self, scope: ReuseScope) -> pl.DataFrame:
        """Every call recorded by a run ``scope`` names, as ``ROW_SCHEMA`` rows (what a
        sharded run's shards may be served)."""
        if scope.runs is None:
            raise ValueError("export_runs needs a scope of named runs, not ANY_RUN")
        with self._db_lock:
            table = self.con.sql(statement("ledger_export_runs"), params={
                "runs": sorted(scope.runs), "unattributed": scope.unattributed}).to_arrow_table()
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        return as_ledger_frame(frame)

    def count(self) -> int:
        with self._db_lock:
            [(n,)] = self.con.execute("SELECT count(*) FROM llm_calls").fetchall()
        return int(n)

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[dict[str, Any]]:
        with self._db_lock:
            return _named_rows(
                self.con.execute(sql, params if isinstance(params, dict) else list(params)))

    # -- writes ------------------------------------------------------------

    def check_open(self) -> None:
        """Raises when this ledger may record no more calls (so none may be sent): never
        for the store's ledger; a shard's ``PartLedger`` once its attempt is superseded."""

    def write_rows(self, rows: Sequence[dict[str, Any]]) -> None:
        """Commit rows in one transaction (synchronous)."""
        if rows:
            self.insert_frame(rows_frame(rows))

    def insert_frame(self, batch: pl.DataFrame, statement_name: str = "ledger_insert") -> None:
        """Commit a frame of ``ROW_SCHEMA`` rows in one transaction; ``statement_name``:
        ``ledger_import`` skips rows the ledger already holds (merging shard ledgers)."""
        with self._db_lock:
            self.con.register("batch", batch)
            try:
                self.con.execute("BEGIN TRANSACTION")
                self.con.execute(statement(statement_name))
                self.con.execute("COMMIT")
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
            finally:
                self.con.unregister("batch")
            self.commits += 1
            if self._run_keys:  # a superset is safe (a query too many), a subset is not
                for run_id, key in batch.select("run_id", "key").iter_rows():
                    loaded = self._run_keys.get(run_id)
                    if loaded is not None:
                        loaded.add(key)

    def flush_soon(self) -> None:
        """Commit the rows waiting now without waiting out the linger (called on the event
        loop that records). A row that comes after this joins the next commit."""
        if self._batch_ready is not None:
            self._batch_ready.set()

    async def record(self, row: dict[str, Any]) -> None:
        """Returns once the row is committed (group commit with concurrent callers)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((row, future))
        if self._flusher is None or self._flusher.done():
            self._batch_ready = asyncio.Event()
            self._flusher = asyncio.create_task(self._flush_loop())
        if len(self._pending) >= self.max_batch and self._batch_ready is not None:
            self._batch_ready.set()
        await future

    async def _flush_loop(self) -> None:
        assert self._batch_ready is not None
        while self._pending:
            if self.linger_s > 0 and len(self._pending) < self.max_batch:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._batch_ready.wait(), self.linger_s)
            self._batch_ready.clear()
            batch, self._pending = self._pending, []
            try:
                await asyncio.to_thread(self.write_rows, [row for row, _ in batch])
            except BaseException as exc:
                # Each caller whose row was in the commit gets the error (a superseded shard
                # attempt's, a full disk's); rows queued meanwhile get their own attempt.
                # Raised from this task, nobody would retrieve it: asyncio logs it at
                # garbage collection, which (CPython 3.11.7) later broke the process's
                # next compile with "AST constructor recursion depth mismatch". Only a
                # cancellation ends the loop.
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                if isinstance(exc, Exception):
                    continue
                raise
            for _, fut in batch:
                if not fut.done():
                    fut.set_result(None)
