"""The ``dedup`` stage: exact and K-means (elbow-chosen k) near-duplicate removal.

Reads the kept rows of the newest (or given) upstream snapshot; writes every row it saw
with its decision."""

from __future__ import annotations

from essaybench.curate.config import CurateConfig
from essaybench.curate.dedup import run_dedup
from essaybench.stages.curate_step import run_curate_step
from essaybench.store import Snapshot, Store

STAGE = "dedup"


def dedup_stage(store: Store, run_id: str, config: CurateConfig,
                upstream: Snapshot | None) -> Snapshot:
    return run_curate_step(store, run_id, STAGE, upstream, config.dedup,
                           lambda table: run_dedup(table, config.dedup))
