"""The ``judge`` stage as its own flow, rerunnable from its upstream snapshot."""

from __future__ import annotations

from prefect import flow

from essaybench.core.settings import (
    DEFAULT_BENCHMARK_CONFIG,
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_STORE_ROOT,
)
from essaybench.store.store import new_run_id
from essaybench.tasks.benchmark import benchmark_stages_task


@flow(name="judge")
def judge_flow(
    config_path: str = DEFAULT_BENCHMARK_CONFIG,
    store_root: str = DEFAULT_STORE_ROOT,
    run_id: str | None = None,
    upstream_snapshot_id: str | None = None,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> str:
    """Run judge; returns the id of the snapshot it wrote."""
    return benchmark_stages_task("judge", run_id or new_run_id(), config_path, store_root,
                                 upstream_snapshot_id,
                                 lock_timeout_s=lock_timeout_s)["judge"]
