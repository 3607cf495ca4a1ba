"""The ``rouge`` stage: ROUGE-L < 0.7 pruning, with rouge-chinese's exact scores.

Reads the kept rows of the newest (or given) upstream snapshot; writes every row it saw
with its decision."""

from __future__ import annotations

from essaybench.curate.config import CurateConfig
from essaybench.curate.rouge import run_rouge
from essaybench.stages.curate_step import run_curate_step
from essaybench.store import Snapshot, Store

STAGE = "rouge"


def rouge_stage(store: Store, run_id: str, config: CurateConfig,
                upstream: Snapshot | None) -> Snapshot:
    return run_curate_step(store, run_id, STAGE, upstream, config.rouge,
                           lambda table: run_rouge(table, config.rouge))
