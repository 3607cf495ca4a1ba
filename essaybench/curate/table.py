"""The row contract shared by every curation stage.

A stage receives the rows its upstream stage kept and returns every one of
them, in the same order, with ``decision`` set and, for a drop, a ``reason``.
Columns a stage does not touch pass through unchanged. Downstream stages see
only rows whose decision is ``kept``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import polars as pl


class Decision(StrEnum):
    KEPT = "kept"
    QUARANTINED = "quarantined"  # could not be read as a record (collect)
    FILTERED = "filtered"  # read, but not an essay prompt we want (filter)
    DUPLICATE = "duplicate"  # exact or near duplicate of a kept prompt (dedup, rouge)
    UNCLASSIFIED = "unclassified"  # genre undecidable; waits for manual review (classify)


# Columns present from collect onwards.
RECORD_COLUMNS: dict[str, type[pl.DataType] | pl.DataType] = {
    "record_id": pl.Utf8,  # hash of (source, file, locator): one raw record
    "source": pl.Utf8,  # source name from the sources config
    "file": pl.Utf8,  # path of the raw file, as configured
    "locator": pl.Utf8,  # "line 12", "line 12 turn 3", "row 5 (line 6)", "item 7 (line 30)"
    "source_ref": pl.Utf8,  # the record's own id in the raw source, where it has one
    "raw_text": pl.Utf8,  # the text as read (null for a quarantined record)
    "decision": pl.Utf8,
    "reason": pl.Utf8,  # machine-readable reason code for a drop, e.g. "too_short"
    "detail": pl.Utf8,  # human-readable evidence: matched pattern, parse error, ...
}

# Added by filter: the normalised text every later comparison uses, and its id.
FILTER_COLUMNS: dict[str, type[pl.DataType] | pl.DataType] = {
    "text": pl.Utf8,
    "prompt_id": pl.Utf8,
}

# Added by dedup and rouge for a duplicate: which kept prompt it duplicated.
DUPLICATE_COLUMNS: dict[str, type[pl.DataType] | pl.DataType] = {
    "duplicate_of": pl.Utf8,
    "similarity": pl.Float64,
}

# Added by classify.
CLASSIFY_COLUMNS: dict[str, type[pl.DataType] | pl.DataType] = {
    "genre": pl.Utf8,  # argumentative | narrative | descriptive | expository
    "genre_source": pl.Utf8,  # rule | llm | manual
    "genre_evidence": pl.Utf8,
    "prompt_set": pl.Utf8,  # open | constrained
    "set_source": pl.Utf8,  # rule | llm | manual
    "set_evidence": pl.Utf8,
    "constraints": pl.Utf8,  # JSON list of {"kind", "text", ...} found in the prompt
}


@dataclass(frozen=True)
class StageOutput:
    """Every input row with its decision, plus facts stored with the snapshot."""

    table: pl.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)

    def kept(self) -> pl.DataFrame:
        return kept_rows(self.table)

    def counts(self) -> dict[str, int]:
        return decision_counts(self.table)


def kept_rows(table: pl.DataFrame) -> pl.DataFrame:
    return table.filter(pl.col("decision") == Decision.KEPT.value)


def decision_counts(table: pl.DataFrame) -> dict[str, int]:
    """Rows per decision; a table without decisions (a report) counts all rows as kept."""
    if table.height == 0:
        return {}
    if "decision" not in table.columns:
        return {Decision.KEPT.value: table.height}
    rows = table.group_by("decision").len().iter_rows()
    return {str(decision): int(n) for decision, n in rows}


def ensure_columns(
    table: pl.DataFrame, columns: dict[str, type[pl.DataType] | pl.DataType]
) -> pl.DataFrame:
    """Add any missing column of ``columns`` as nulls of its type."""
    missing = [pl.lit(None, dtype=dtype).alias(name) for name, dtype in columns.items()
               if name not in table.columns]
    return table.with_columns(missing) if missing else table


def require_kept_input(table: pl.DataFrame, stage: str, upstream: str,
                       columns: tuple[str, ...] = ("text", "prompt_id")) -> None:
    """A stage's input must be its upstream's kept rows, with ``columns`` present and set."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{stage}: input lacks column(s) {missing}; run {upstream} first")
    nulls = [c for c in columns if table[c].null_count()]
    if nulls:
        bad = table.filter(pl.any_horizontal(pl.col(nulls).is_null()))
        ids = bad["prompt_id"].drop_nulls().head(3).to_list() if "prompt_id" in bad.columns else []
        raise ValueError(f"{stage}: null values in {nulls} ({bad.height} row(s), e.g. prompt_id "
                         f"{ids}); {upstream} should have dropped those rows")
    if "decision" in table.columns:
        other = table.filter(pl.col("decision").is_not_null()
                             & (pl.col("decision") != Decision.KEPT.value))
        if other.height:
            raise ValueError(
                f"{stage}: expects kept rows only (of {upstream}), got {other.height} other "
                f"row(s), e.g. prompt_id {other['prompt_id'][0]!r}")
