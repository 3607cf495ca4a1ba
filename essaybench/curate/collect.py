"""Collect: read every configured raw source into one table of records.

Every record keeps its provenance (source, file, locator, the source's own id).
A malformed line or row is quarantined with its reason; a missing or
undecodable file stops the stage with an error naming it, and so do sources that give
no usable record at all (empty files, or every record quarantined): curating nothing
would publish an empty prompt set as ``latest``.

Personal data is replaced by typed placeholders here, before anything is stored
(``curate/pii``): in each record's text, its source id and a quarantined record's
excerpt. ``pii`` names the kinds a record held; the stage's meta counts them.

The stage streams (``stream_collect``): sources are read a chunk at a time
(``sources.readers``) and records leave as table batches of ``batch_rows`` rows, written
to the snapshot as they come; what stays for the whole run is 8 bytes per record (the
check that no two records share an id) and the counts.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl

from essaybench.core.contracts import Decision, StageOutput, StreamedOutput
from essaybench.core.errors import UserError
from essaybench.core.hashing import content_hash
from essaybench.core.text_memo import TextMemo
from essaybench.curate.pii import Deidentified, DeidParams, deidentify
from essaybench.curate.table import RECORD_COLUMNS
from essaybench.sources.config import SourcesConfig
from essaybench.sources.readers import READERS


class NoRecordsError(UserError, ValueError):
    """The sources gave no usable record: nothing to curate."""


BATCH_ROWS = 50_000


def run_collect(config: SourcesConfig, deid: DeidParams | None = None, *,
                batch_rows: int = BATCH_ROWS) -> StageOutput:
    """``stream_collect``'s table, whole."""
    return stream_collect(config, deid, batch_rows=batch_rows).collect()


def stream_collect(config: SourcesConfig, deid: DeidParams | None = None, *,
                   batch_rows: int = BATCH_ROWS) -> StreamedOutput:
    """Every record of every source, ``batch_rows`` rows at a time; the meta is complete
    after the last batch."""
    meta: dict[str, Any] = {}
    return StreamedOutput(_batches(config, deid or DeidParams(), batch_rows, meta), meta)


def _batches(config: SourcesConfig, deid: DeidParams, batch_rows: int,
             meta: dict[str, Any]) -> Iterator[pl.DataFrame]:
    started = time.perf_counter()
    rows: list[dict[str, str | None]] = []
    ids = _RecordIds()
    per_source: dict[str, dict[str, int]] = {}
    found: Counter[str] = Counter()
    with_pii = 0
    memo: TextMemo[Deidentified] = TextMemo(lambda text: deidentify(text, deid),
                                            lambda text, found: len(text) + len(found.text))
    for spec in config.sources:
        path = config.resolve(spec)
        kept = quarantined = 0
        for item in READERS[spec.kind](path, spec):
            decision = Decision.QUARANTINED if item.reason else Decision.KEPT
            if item.reason:
                quarantined += 1
            else:
                kept += 1
            text, ref, detail = (_deidentify(v, deid, memo) for v in
                                 (item.text, item.source_ref, item.detail))
            kinds = text.counts + ref.counts + detail.counts
            found += kinds
            with_pii += bool(kinds)
            rows.append({
                "record_id": "r" + content_hash(
                    {"source": spec.name, "file": spec.path, "locator": item.locator}, 15),
                "source": spec.name,
                "file": spec.path,
                "locator": item.locator,
                "source_ref": ref.text if item.source_ref is not None else None,
                "raw_text": text.text if item.text is not None else None,
                "decision": decision.value,
                "reason": item.reason,
                "detail": detail.text if item.detail is not None else None,
                "pii": ",".join(sorted(text.counts)) or None,  # what the prompt held
            })
            if len(rows) >= batch_rows:
                yield ids.checked(pl.DataFrame(rows, schema=RECORD_COLUMNS))
                rows = []
        per_source[spec.name] = {"records": kept + quarantined, "quarantined": quarantined}
    if not any(counts["records"] > counts["quarantined"] for counts in per_source.values()):
        what = "; ".join(f"{spec.name} ({config.resolve(spec)}): "
                         + _counted(per_source[spec.name]) for spec in config.sources)
        raise NoRecordsError(f"nothing to curate: the sources gave no usable record ({what})")
    yield ids.checked(pl.DataFrame(rows, schema=RECORD_COLUMNS))
    ids.check_all()
    meta.update({"per_source": per_source,
                 "personal_data": {"mode": deid.mode, "records": with_pii,
                                   "replaced": dict(sorted(found.items()))},
                 "seconds": round(time.perf_counter() - started, 3)})


class _RecordIds:
    """Checks that no two records share an id (a locator read twice: a bug in a reader),
    at 8 bytes per record (the id's 60 hash bits as an integer), not the whole table."""

    def __init__(self) -> None:
        self._parts: list[np.ndarray] = []

    def checked(self, batch: pl.DataFrame) -> pl.DataFrame:
        duplicated = batch.filter(pl.col("record_id").is_duplicated())
        if duplicated.height:
            first = duplicated.row(0, named=True)
            raise ValueError(f"two records share a locator: {first['source']} "
                             f"{first['locator']}")
        self._parts.append(np.array([int(r[1:], 16) for r in batch["record_id"]],
                                    dtype=np.uint64))
        return batch

    def check_all(self) -> None:
        if not self._parts:
            return
        every = np.sort(np.concatenate(self._parts))
        same = np.flatnonzero(every[1:] == every[:-1])
        if same.size:
            raise ValueError(f"two records share a locator: record id r{int(every[same[0]]):015x}")


def _deidentify(text: str | None, deid: DeidParams,
                memo: TextMemo[Deidentified]) -> Deidentified:
    """``deidentify``, through ``memo`` (once per distinct text while it holds it: the
    finders and name cues cost more than the rest of a record)."""
    if not text:
        return deidentify(text, deid)
    return memo(text)


def _counted(counts: dict[str, int]) -> str:
    if not counts["records"]:
        return "no records (empty)"
    return f"{counts['records']} records, all quarantined"
