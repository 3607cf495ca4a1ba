"""The curation funnel: where every raw record went, and a check that it balances.

``raw`` counts the records collect read, one per physical record of a source: a JSONL
line, a CSV row (a broken CSV record counts each physical line it spans, each
quarantined with its line number: ``sources.readers.read_csv``), a numbered item."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from typing import Any

import polars as pl

from essaybench.core.contracts import Decision, decision_counts

CURATE_STAGES = ("collect", "filter", "dedup", "rouge", "classify")
# What compute_funnel reads of a stage's table.
FUNNEL_COLUMNS = ("decision", "reason", "pii")


class FunnelImbalance(AssertionError):
    """Records appeared or vanished between stages: a bug, never a data problem."""


@dataclass(frozen=True)
class Funnel:
    raw: int
    quarantined: int
    filtered: int
    exact_duplicates: int
    near_duplicates: int
    rouge_duplicates: int
    unclassified: int
    final: int
    reasons: dict[str, dict[str, int]] = field(default_factory=dict)
    # raw records that held each kind of personal data (masked in collect: curate/pii)
    personal_data: dict[str, int] = field(default_factory=dict)

    @property
    def duplicates(self) -> int:
        return self.exact_duplicates + self.near_duplicates + self.rouge_duplicates

    @property
    def balanced(self) -> bool:
        return self.raw == (self.final + self.quarantined + self.filtered + self.duplicates
                            + self.unclassified)

    def steps(self) -> list[tuple[str, int, int]]:
        """(step, removed at this step, remaining after it)."""
        remaining = self.raw
        out: list[tuple[str, int, int]] = [("raw records", 0, remaining)]
        for name, removed in (
            ("quarantined (unreadable)", self.quarantined),
            ("filtered (heuristics)", self.filtered),
            ("deduplicated (exact + MinHash + K-means)",
             self.exact_duplicates + self.near_duplicates),
            ("pruned (ROUGE-L)", self.rouge_duplicates),
            ("unclassified (needs review)", self.unclassified),
        ):
            remaining -= removed
            out.append((name, removed, remaining))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "duplicates": self.duplicates, "balanced": self.balanced}


def _reasons(table: pl.DataFrame, decision: Decision) -> dict[str, int]:
    dropped = table.filter(pl.col("decision") == decision.value)
    if dropped.height == 0:
        return {}
    return {str(r): int(n) for r, n in
            dropped.group_by("reason").len().sort("reason").iter_rows()}


def _personal_data(collect: pl.DataFrame) -> dict[str, int]:
    if "pii" not in collect.columns:  # collected before de-identification
        return {}
    kinds = collect["pii"].drop_nulls().str.split(",").explode()
    return {str(k): int(n) for k, n in kinds.value_counts().sort(kinds.name).iter_rows()}


def compute_funnel(tables: Mapping[str, pl.DataFrame]) -> Funnel:
    """Funnel over the five curation stage tables; raises if records went missing."""
    missing = [s for s in CURATE_STAGES if s not in tables]
    if missing:
        raise KeyError(f"funnel needs every curation stage; missing: {missing}")
    counts = {stage: decision_counts(tables[stage]) for stage in CURATE_STAGES}
    for up, down in pairwise(CURATE_STAGES):
        kept_up = counts[up].get(Decision.KEPT.value, 0)
        if tables[down].height != kept_up:
            raise FunnelImbalance(
                f"stage {down} saw {tables[down].height} rows but {up} kept {kept_up}")
    dedup_reasons = _reasons(tables["dedup"], Decision.DUPLICATE)
    exact = dedup_reasons.get("exact_duplicate", 0)
    funnel = Funnel(
        raw=tables["collect"].height,
        quarantined=counts["collect"].get(Decision.QUARANTINED.value, 0),
        filtered=counts["filter"].get(Decision.FILTERED.value, 0),
        exact_duplicates=exact,
        near_duplicates=counts["dedup"].get(Decision.DUPLICATE.value, 0) - exact,
        rouge_duplicates=counts["rouge"].get(Decision.DUPLICATE.value, 0),
        unclassified=counts["classify"].get(Decision.UNCLASSIFIED.value, 0),
        final=counts["classify"].get(Decision.KEPT.value, 0),
        reasons={
            "quarantined": _reasons(tables["collect"], Decision.QUARANTINED),
            "filtered": _reasons(tables["filter"], Decision.FILTERED),
            "dedup": dedup_reasons,
            "rouge": _reasons(tables["rouge"], Decision.DUPLICATE),
            "unclassified": _reasons(tables["classify"], Decision.UNCLASSIFIED),
        },
        personal_data=_personal_data(tables["collect"]),
    )
    if not funnel.balanced:
        raise FunnelImbalance(f"funnel does not balance: {funnel.to_dict()}")
    return funnel
