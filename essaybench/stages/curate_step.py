"""What every curation stage after ``collect`` shares: its upstream stage, reading that
snapshot's kept rows, and running the step against the store."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import polars as pl
from pydantic import BaseModel

from essaybench.core.contracts import StageOutput, StreamedOutput
from essaybench.core.errors import NotFoundError
from essaybench.curate.filter import BATCH_ROWS
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
    table = snapshot.read_kept()
    return run_stage(store, run_id=run_id, stage=stage, upstream=[snapshot], params=params,
                     compute=lambda: compute(table), rows_in=table.height)


def stream_curate_step(store: Store, run_id: str, stage: str, upstream: Snapshot | None,
                       params: BaseModel,
                       compute: Callable[[Iterator[pl.DataFrame]], StreamedOutput],
                       batch_rows: int = BATCH_ROWS) -> Snapshot:
    """``run_curate_step`` for a stage that streams: ``compute`` gets the kept rows of
    ``upstream`` ``batch_rows`` rows of the file at a time, and its batches are written as
    they come."""
    snapshot = check_upstream(stage, upstream)
    return run_stage(store, run_id=run_id, stage=stage, upstream=[snapshot], params=params,
                     compute=lambda: compute(snapshot.iter_kept(batch_rows)),
                     rows_in=snapshot.count_kept())
