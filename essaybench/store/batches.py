"""Write a snapshot a batch of rows at a time: a stage that streams (collect, filter) never
holds its whole table.

The content hash is ``table_hash``'s, computed as the batches pass (the header of stage,
upstream and schema, then each row's NDJSON), so a streamed table and the same table
written whole get the same snapshot id. The Parquet file is written to a temporary name
beside its final one, a row group per batch, and renamed once its id is known; the
snapshot's meta and id go into the file's footer then.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

import polars as pl
import pyarrow.parquet as pq

from essaybench.core.hashing import canonical_json
from essaybench.store.table_hash import TableHasher

META_KEY = b"essaybench.meta"
SNAPSHOT_KEY = b"essaybench.snapshot_id"
# The largest row group of a snapshot written whole (a streamed one has a group per batch).
ROW_GROUP_ROWS = 50_000


class BatchSchemaError(ValueError):
    """A stage yielded batches of different schemas: a bug in the stage."""


@dataclass(frozen=True)
class WrittenBatches:
    snapshot_id: str
    content_hash: str
    rel: Path  # under the store root
    rows: int
    meta: dict[str, Any]


def write_batches(root: Path, stage: str, batches: Iterable[pl.DataFrame],
                  upstream: Sequence[str], meta: Callable[[], dict[str, Any]]
                  ) -> WrittenBatches:
    """Write ``batches`` as one snapshot of ``stage`` under ``root``; ``meta`` is asked for
    after the last batch. An exception from the batches leaves no file behind."""
    folder = root / "snapshots" / stage
    folder.mkdir(parents=True, exist_ok=True)
    writer: pq.ParquetWriter | None = None
    with temporary_beside(folder) as tmp:
        try:
            hasher: TableHasher | None = None
            schema: pl.Schema | None = None
            rows = 0
            for batch in batches:
                if schema is None:
                    schema = batch.schema
                    hasher = TableHasher(stage, schema, upstream)
                    writer = pq.ParquetWriter(tmp, batch.to_arrow().schema)
                elif batch.schema != schema:
                    raise BatchSchemaError(f"stage {stage!r} yielded a batch of schema "
                                           f"{dict(batch.schema)} after {dict(schema)}")
                assert hasher is not None and writer is not None
                if batch.height:
                    batch.write_ndjson(cast(IO[bytes], hasher))
                    writer.write_table(batch.to_arrow())
                    rows += batch.height
            if hasher is None or writer is None:
                raise BatchSchemaError(f"stage {stage!r} yielded no batch (not even an empty "
                                       "one)")
            content_hash = hasher.hexdigest()
            snapshot_id = f"{stage}-{content_hash[:16]}"
            facts = meta()
            writer.add_key_value_metadata(footer_of(snapshot_id, facts))
            writer.close()
            writer = None
        finally:
            if writer is not None:
                writer.close()
        rel = Path("snapshots") / stage / f"{snapshot_id}.parquet"
        if not (root / rel).is_file():
            os.replace(tmp, root / rel)  # atomic: readers never see a half-written snapshot
        return WrittenBatches(snapshot_id, content_hash, rel, rows, facts)


@contextmanager
def temporary_beside(folder: Path) -> Iterator[str]:
    """A temporary file's name in ``folder`` (to be renamed into place there, atomically),
    removed on the way out unless it was renamed."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".parquet")
    os.close(fd)
    try:
        yield tmp
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def footer_of(snapshot_id: str, meta: dict[str, Any]) -> dict[bytes, bytes]:
    """What a snapshot file's key-value metadata holds: its meta and its id."""
    return {META_KEY: canonical_json(meta).encode(), SNAPSHOT_KEY: snapshot_id.encode()}


def footer(path: Path) -> dict[bytes, bytes]:
    """The key-value metadata of a snapshot file (``META_KEY``, ``SNAPSHOT_KEY``), whether
    it was written whole or a batch at a time."""
    return dict(pq.ParquetFile(path).metadata.metadata or {})
