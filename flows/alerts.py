"""The ``alerts`` stage as its own flow: a run against the last comparable run."""

from __future__ import annotations

from prefect import flow

from essaybench.core.settings import (
    DEFAULT_BENCHMARK_CONFIG,
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_STORE_ROOT,
)
from essaybench.store import Store
from essaybench.tasks.alerts import alerts_stage_task


@flow(name="alerts")
def alerts_flow(
    run_id: str,
    config_path: str = DEFAULT_BENCHMARK_CONFIG,
    store_root: str = DEFAULT_STORE_ROOT,
    judge_snapshot_id: str | None = None,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> str:
    """Alerts of ``run_id`` (its newest judge snapshot, or the one given); returns the
    alerts snapshot id."""
    judged = judge_snapshot_id or Store(store_root, lock_timeout_s).require_ok_snapshot(
        "judge", run_id, "alerts").snapshot_id
    return alerts_stage_task(run_id, config_path, store_root, judged, lock_timeout_s)
