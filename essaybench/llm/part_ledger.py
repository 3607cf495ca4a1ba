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

import threading
from collections.abc import Sequence
from typing import Any
from uuid import uuid4

import duckdb

from essaybench.core.sql import statement
from essaybench.llm.ledger import Ledger, as_ledger_frame, rows_frame
from essaybench.store.parts import PartStore


class ShardSuperseded(RuntimeError):
    """This attempt of a shard is no longer the one its run waits for."""


class PartLedger(Ledger):
    """``prefix``: where this shard's parts go (``runs/<run>/ledger/shard=K``); ``seed``:
    parts (paths under ``parts``) of calls the shard may be served but did not make."""

    def __init__(self, parts: PartStore, prefix: str, seed: Sequence[str] = (),
                 linger_s: float = 0.2, max_batch: int = 256,
                 attempt: str | None = None) -> None:
        super().__init__(prefix, linger_s=linger_s, max_batch=max_batch)
        self.parts = parts
        self.prefix = prefix.rstrip("/")
        self.seed = tuple(seed)
        self.attempt = attempt or uuid4().hex[:12]  # parts of two attempts never share a name
        # Set when another attempt of the same shard owns it now: this one records nothing
        # more (its later rows could disagree with what the owner serves and writes).
        self.superseded = threading.Event()
        self._sequence = 0
        self.loaded_rows = 0

    def open(self) -> PartLedger:
        if self._con is not None:
            return self
        con = duckdb.connect(":memory:")
        con.execute(statement("ledger_schema"))
        self._con = con
        earlier = self.parts.list(self.prefix, ".parquet")
        for rel in [*self.seed, *earlier]:
            frame = as_ledger_frame(self.parts.read_parquet(rel))
            if frame.height:
                super().insert_frame(frame)
                self.loaded_rows += frame.height
        return self

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def write_rows(self, rows: Sequence[dict[str, Any]]) -> None:
        """The part is on storage before the rows are looked up or acknowledged."""
        if not rows:
            return
        if self.superseded.is_set():
            raise ShardSuperseded(f"{self.prefix}: attempt {self.attempt} was superseded by "
                                  "a newer attempt of its shard; it records nothing more")
        batch = rows_frame(rows)
        self._sequence += 1
        self.parts.write_parquet(
            f"{self.prefix}/part-{self.attempt}-{self._sequence:06d}.parquet", batch)
        super().insert_frame(batch)
