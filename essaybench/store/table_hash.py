"""A snapshot's content hash: the stage, its upstream snapshots and schema, then every row
as NDJSON (a stable, library-version-independent rendering of the data)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import IO, cast

import polars as pl

from essaybench.core.hashing import canonical_json


class TableHasher:
    """A write-only file that hashes what is written to it, after the table's header:
    polars writes NDJSON into it in ~10 MB pieces, so no rendering of a table is ever held
    whole (the whole text of a paper-scale essays table, held at once and copied twice, was
    once a run's memory peak); batches of one table, written one after another, hash as the
    table does."""

    def __init__(self, stage: str, schema: pl.Schema, upstream: Sequence[str]) -> None:
        header = canonical_json({"stage": stage, "upstream": list(upstream),
                                 "schema": {k: str(v) for k, v in schema.items()}})
        self._hash = hashlib.sha256(header.encode() + b"\n")

    def write(self, data: bytes) -> int:
        self._hash.update(data)
        return len(data)

    def flush(self) -> None:
        pass

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def table_hash(stage: str, table: pl.DataFrame, upstream: Sequence[str]) -> str:
    hasher = TableHasher(stage, table.schema, upstream)
    table.write_ndjson(cast(IO[bytes], hasher))
    return hasher.hexdigest()
