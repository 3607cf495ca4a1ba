"""A shard's call ledger on object storage: the same ledger, its rows kept as immutable
Parquet parts instead of a DuckDB file.

Several shards of one run work at once, on several machines, and DuckDB allows one writer
per file; so each shard records its calls under a prefix of its own
(``runs/<run>/ledger/shard=K/``), one part per group commit, written (atomically) before
any caller is told its call is stored: the same durability contract as ``Ledger``, on
a local folder or S3 alike. Look-ups run on an in-memory DuckDB holding the seed (the
calls the run may be served, exported by the parent) and every part the shard's earlier
attempts wrote, so a shard re-sent after a crash pays only for what was in flight.
The parent merges the parts into the store's ledger (``Ledger.insert_frame`` with
``ledger_import``)."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any
from uuid import uuid4

import duckdb
import polars as pl

from essaybench.core.hashing import sha256_hex
from essaybench.core.sql import statement
from essaybench.llm.ledger import Ledger, as_ledger_frame, rows_frame
from essaybench.llm.scope import ANY_RUN, ReuseScope
from essaybench.llm.types import ChatResult
from essaybench.store.parts import PartStore

FENCE_S = 0.1  # the owner record is read at most this often


class ShardSuperseded(RuntimeError):
    """This attempt of a shard is no longer the one its run waits for."""


class PartLedger(Ledger):
    """``prefix``: where this shard's parts go (``runs/<run>/ledger/shard=K``); ``seed``:
    parts (paths under ``parts``) of calls the shard may be served but did not make.

    ``fence``: whether this attempt has been superseded (reads the shard's owner record).
    It is asked before each batch of calls is looked up and before each group commit is
    written, so a superseded attempt stops within one group commit (``linger_s``, or
    ``max_batch`` calls), not one heartbeat: once it answers yes, the gateway sends
    nothing more (``check_open``, before every send) and no row is recorded."""

    def __init__(self, parts: PartStore, prefix: str, seed: Sequence[str] = (),
                 linger_s: float = 0.2, max_batch: int = 256,
                 attempt: str | None = None,
                 fence: Callable[[], bool] | None = None) -> None:
        super().__init__(prefix, linger_s=linger_s, max_batch=max_batch)
        self.parts = parts
        self.prefix = prefix.rstrip("/")
        self.seed = tuple(seed)
        self.attempt = attempt or uuid4().hex[:12]  # parts of two attempts never share a name
        # Set when another attempt of the same shard owns it now: this one records nothing
        # more (its later rows could disagree with what the owner serves and writes).
        self.superseded = threading.Event()
        self.fence = fence
        self._fenced_at = -FENCE_S
        self._sequence = 0
        self.loaded_rows = 0
        # sha256 of every part of this shard the attempt used (its earlier attempts' and its
        # own): recorded in the shard's _SUCCESS.json, checked by the parent's merge
        self.hashes: dict[str, str] = {}

    def open(self) -> PartLedger:
        if self._con is not None:
            return self
        con = duckdb.connect(":memory:")
        con.execute(statement("ledger_schema"))
        self._con = con
        earlier = self.parts.list(self.prefix, ".parquet")
        for rel in [*self.seed, *earlier]:
            data = self.parts.read_bytes(rel)
            if rel not in self.seed:  # the seed is the parent's, not this shard's
                self.hashes[rel] = sha256_hex(data)
            frame = as_ledger_frame(pl.read_parquet(io.BytesIO(data)))
            if frame.height:
                super().insert_frame(frame)
                self.loaded_rows += frame.height
        return self

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def check_open(self) -> None:
        if self.superseded.is_set():
            raise ShardSuperseded(f"{self.prefix}: attempt {self.attempt} was superseded by "
                                  "a newer attempt of its shard; it sends and records "
                                  "nothing more")

    def check_fence(self) -> None:
        """Asks ``fence`` (one read of the owner record; at most every ``FENCE_S``: a
        batch's follow-ups are looked up in many small bunches) and stops a superseded
        attempt."""
        now = time.monotonic()
        if self.fence is not None and not self.superseded.is_set() \
                and now - self._fenced_at >= FENCE_S:
            self._fenced_at = now
            if self.fence():
                self.superseded.set()
        self.check_open()

    def lookup_ok(self, keys: Iterable[str], failed_since: datetime | None = None,
                  scope: ReuseScope = ANY_RUN) -> dict[str, ChatResult]:
        self.check_fence()  # before each batch (and each bunch of follow-ups) is sent
        return super().lookup_ok(keys, failed_since, scope)

    def write_rows(self, rows: Sequence[dict[str, Any]]) -> None:
        """The part is on storage before the rows are looked up or acknowledged."""
        if not rows:
            return
        self.check_fence()
        batch = rows_frame(rows)
        self._sequence += 1
        rel = f"{self.prefix}/part-{self.attempt}-{self._sequence:06d}.parquet"
        buffer = io.BytesIO()
        batch.write_parquet(buffer)
        self.parts.write_bytes(rel, buffer.getvalue())
        self.hashes[rel] = sha256_hex(buffer.getvalue())
        super().insert_frame(batch)
