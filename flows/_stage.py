"""Shared body of the single-stage curation flows."""

from __future__ import annotations

from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S
from essaybench.stages.curate import resolve_upstream
from essaybench.store import Store
from essaybench.store.store import new_run_id
from essaybench.tasks.curate import curation_stage_task


def run_one_stage(
    stage: str, config_path: str, store_root: str, run_id: str | None,
    upstream_snapshot_id: str | None, base_run: str | None,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> str:
    """Run ``stage`` from an explicit upstream snapshot, or the newest ok one."""
    if upstream_snapshot_id is None and stage != "collect":
        upstream = resolve_upstream(Store(store_root, lock_timeout_s), stage, base_run)
        upstream_snapshot_id = upstream.snapshot_id if upstream else None
    return curation_stage_task(stage, run_id or new_run_id(), config_path, store_root,
                               upstream_snapshot_id, lock_timeout_s)
