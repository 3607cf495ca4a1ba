"""Collect: read every configured raw source into one table of records.

Every record keeps its provenance (source, file, locator, the source's own id).
A malformed line or row is quarantined with its reason; a missing or
undecodable file stops the stage with an error naming it, and so do sources that give
no usable record at all (empty files, or every record quarantined): curating nothing
would publish an empty prompt set as ``latest``.
"""

from __future__ import annotations

import time

import polars as pl

from essaybench.core.contracts import Decision, StageOutput
from essaybench.core.errors import UserError
from essaybench.core.hashing import content_hash
from essaybench.curate.table import RECORD_COLUMNS
from essaybench.sources.config import SourcesConfig
from essaybench.sources.readers import READERS


class NoRecordsError(UserError, ValueError):
    """The sources gave no usable record: nothing to curate."""


def run_collect(config: SourcesConfig) -> StageOutput:
    started = time.perf_counter()
    rows: list[dict[str, str | None]] = []
    per_source: dict[str, dict[str, int]] = {}
    for spec in config.sources:
        path = config.resolve(spec)
        kept = quarantined = 0
        for item in READERS[spec.kind](path, spec):
            decision = Decision.QUARANTINED if item.reason else Decision.KEPT
            if item.reason:
                quarantined += 1
            else:
                kept += 1
            rows.append({
                "record_id": "r" + content_hash(
                    {"source": spec.name, "file": spec.path, "locator": item.locator}, 15),
                "source": spec.name,
                "file": spec.path,
                "locator": item.locator,
                "source_ref": item.source_ref,
                "raw_text": item.text,
                "decision": decision.value,
                "reason": item.reason,
                "detail": item.detail,
            })
        per_source[spec.name] = {"records": kept + quarantined, "quarantined": quarantined}
    if not any(row["decision"] == Decision.KEPT.value for row in rows):
        what = "; ".join(f"{spec.name} ({config.resolve(spec)}): "
                         + _counted(per_source[spec.name]) for spec in config.sources)
        raise NoRecordsError(f"nothing to curate: the sources gave no usable record ({what})")
    table = pl.DataFrame(rows, schema=RECORD_COLUMNS)
    duplicated = table.filter(pl.col("record_id").is_duplicated())
    if duplicated.height:
        first = duplicated.row(0, named=True)
        raise ValueError(f"two records share a locator: {first['source']} {first['locator']}")
    return StageOutput(table, {"per_source": per_source,
                               "seconds": round(time.perf_counter() - started, 3)})


def _counted(counts: dict[str, int]) -> str:
    if not counts["records"]:
        return "no records (empty)"
    return f"{counts['records']} records, all quarantined"
