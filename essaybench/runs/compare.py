"""Comparing a run with an earlier one, read from the store (``essaybench compare``).

Not a stage of its own yet: it reads two runs' ``judge`` snapshots and the essays they
judged and hands them to :func:`essaybench.bench.compare.compare_runs`; the report is
written by the command.
"""

from __future__ import annotations

import polars as pl

from essaybench.bench.compare import compare_runs
from essaybench.core.contracts import OK
from essaybench.core.errors import NotFoundError
from essaybench.store import Snapshot, Store


def previous_run(store: Store, run_id: str) -> str | None:
    """The newest run older than ``run_id`` with a successful judge stage."""
    judged = sorted({(r.started_at, r.run_id) for r in store.stage_runs(None, 10_000)
                     if r.stage == "judge" and r.status == OK})
    mine = [t for t, r in judged if r == run_id]
    if not mine:
        raise NotFoundError(f"run {run_id} has no successful judge stage in {store.root}")
    older = [r for t, r in judged if t < min(mine) and r != run_id]
    return older[-1] if older else None


def compare_snapshots(store: Store, now: Snapshot, before: Snapshot, *,
                      score: str = "score_weighted", n_boot: int = 2000, level: float = 0.95,
                      seed: int = 0) -> pl.DataFrame:
    """:func:`compare_runs` over two judge snapshots and the essays they judged."""
    for snap in (now, before):
        if snap.stage != "judge":
            raise ValueError(f"compare reads 'judge' snapshots, got {snap.snapshot_id}")
    essays = [store.get_snapshot(s.upstream_snapshot_ids[0]).read() for s in (now, before)]
    return compare_runs(now.read(), before.read(), essays_now=essays[0],
                        essays_before=essays[1], score=score, n_boot=n_boot, level=level,
                        seed=seed)
