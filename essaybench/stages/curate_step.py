"""What every curation stage after ``collect`` shares: its upstream stage, reading that
snapshot's kept rows, and running the step against the store."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl
from pydantic import BaseModel

from essaybench.core.contracts import StageOutput, kept_rows
from essaybench.core.errors import NotFoundError
from essaybench.curate.funnel import CURATE_STAGES
from essaybench.store import Snapshot, Store
from essaybench.store.run_stage import run_stage


class NoUpstreamError(NotFoundError):
    """A stage was asked to start from a snapshot that does not exist."""


def upstream_stage(stage: str) -> str | None:
    if stage not in CURATE_STAGES:
        raise ValueError(f"unknown curation stage {stage!r}; stages: {', '.join(CURATE_STAGES)}")
    i = CURATE_STAGES.index(stage)
    return CURATE_STAGES[i - 1] if i else None


def check_upstream(stage: str, upstream: Snapshot | None) -> Snapshot:
    """``upstream``, checked to be a snapshot of ``stage``'s upstream stage."""
    if upstream is None:
        raise NoUpstreamError(f"stage {stage!r} needs its upstream snapshot")
    expected = upstream_stage(stage)
    if upstream.stage != expected:
        raise NoUpstreamError(
            f"stage {stage!r} reads a {expected!r} snapshot, got {upstream.snapshot_id}")
    return upstream


def run_curate_step(store: Store, run_id: str, stage: str, upstream: Snapshot | None,
                    params: BaseModel,
                    compute: Callable[[pl.DataFrame], StageOutput]) -> Snapshot:
    """Run ``compute`` over the kept rows of ``upstream`` and record it as ``stage``."""
    snapshot = check_upstream(stage, upstream)
    table = kept_rows(snapshot.read())
    return run_stage(store, run_id=run_id, stage=stage, upstream=[snapshot], params=params,
                     compute=lambda: compute(table), rows_in=table.height)
