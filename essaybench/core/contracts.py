"""The contracts every stage shares, curation and benchmark alike.

A stage returns a :class:`StageOutput`: a table with one row per input row and its
:class:`Decision` (curation), or one row per result with a status (benchmark), plus
facts stored with the snapshot; a stage that streams returns a :class:`StreamedOutput`, the
same rows a batch at a time. ``GENRES`` and the Table 5 cell layout (``overall`` and
``<genre>/<prompt_set>``) are shared by the prompt set, aggregation and statistics.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

import polars as pl

# The paper's four genres and two prompt sets, in the paper's order.
GENRES = ("argumentative", "narrative", "descriptive", "expository")
PROMPT_SETS = ("open", "constrained")
OVERALL = "overall"  # the Table 5 column over every cell
OK = "ok"  # the status of a call or judgment that succeeded (llm.types.CallStatus.OK)


class Decision(StrEnum):
    KEPT = "kept"
    QUARANTINED = "quarantined"  # could not be read as a record (collect)
    FILTERED = "filtered"  # read, but not an essay prompt we want (filter)
    DUPLICATE = "duplicate"  # exact or near duplicate of a kept prompt (dedup, rouge)
    UNCLASSIFIED = "unclassified"  # genre undecidable; waits for manual review (classify)



@dataclass(frozen=True)
class StageOutput:
    """Every input row with its decision, plus facts stored with the snapshot."""

    table: pl.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)
    # Facts of this stage run, kept in its catalog row, not with the snapshot: a snapshot
    # is content-addressed and written once, but two runs may judge the same rows
    # differently (e.g. run health against another coverage floor).
    run_meta: dict[str, Any] = field(default_factory=dict)

    def kept(self) -> pl.DataFrame:
        return kept_rows(self.table)

    def counts(self) -> dict[str, int]:
        return decision_counts(self.table)


@dataclass
class StreamedOutput:
    """A ``StageOutput`` a batch of rows at a time, for a stage whose table need not be
    held whole (collect, filter): ``batches`` yields every row, in order, all batches of
    one schema (at least one, maybe empty); ``meta`` is complete once the last batch has
    been taken (the producer fills it in as it goes)."""

    batches: Iterator[pl.DataFrame]
    meta: dict[str, Any] = field(default_factory=dict)
    run_meta: dict[str, Any] = field(default_factory=dict)

    def collect(self) -> StageOutput:
        """The whole table: for callers that want it in memory (tests, small inputs)."""
        table = pl.concat(list(self.batches), rechunk=True)
        return StageOutput(table, self.meta, self.run_meta)


Frame = TypeVar("Frame", pl.DataFrame, pl.LazyFrame)


def kept_rows(table: Frame) -> Frame:
    """The rows whose decision is ``kept`` (of a table, or of a scan: then pushed into it)."""
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


def _order(values: list[str], preferred: tuple[str, ...]) -> list[str]:
    """Paper order first; anything unexpected after it, alphabetically, so it is not lost."""
    return [v for v in preferred if v in values] + sorted(v for v in values if v not in preferred)


def cells(judgments: pl.DataFrame) -> list[str]:
    """The ``genre/prompt_set`` cells present in the table, in the paper's order."""
    # A row without a genre (an open-genre essay whose genre call failed) is in no cell.
    pairs = {(g, s) for g, s in judgments.select("genre", "prompt_set").unique().iter_rows()
             if g is not None}
    genres = _order(sorted({str(g) for g, _ in pairs}), GENRES)
    sets = _order(sorted({str(s) for _, s in pairs}), PROMPT_SETS)
    return [f"{g}/{s}" for g in genres for s in sets if (g, s) in pairs]
