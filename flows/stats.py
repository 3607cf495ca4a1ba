"""The ``stats`` stage as its own flow: confidence intervals, rankings and bias monitors."""

from __future__ import annotations

from prefect import flow

from essaybench.core.settings import (
    DEFAULT_BENCHMARK_CONFIG,
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_STORE_ROOT,
)
from essaybench.tasks.stats import stats_stage_task


@flow(name="stats")
def stats_flow(
    base_run: str,
    config_path: str = DEFAULT_BENCHMARK_CONFIG,
    store_root: str = DEFAULT_STORE_ROOT,
    run_id: str | None = None,
    judge_snapshot_id: str | None = None,
    pairwise_snapshot_id: str | None = None,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> str:
    """Statistics over ``base_run``'s judge (and pairwise) snapshots — or the snapshots
    given — recorded under ``run_id`` (default: the same run); returns the snapshot id."""
    return stats_stage_task(run_id or base_run, config_path, store_root, base_run,
                            judge_snapshot_id, pairwise_snapshot_id, lock_timeout_s)
