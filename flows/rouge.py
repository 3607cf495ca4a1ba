"""The ``rouge`` stage as its own flow, rerunnable from its upstream snapshot."""

from __future__ import annotations

from prefect import flow

from essaybench.core.settings import (
    DEFAULT_CURATE_CONFIG,
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_STORE_ROOT,
)
from essaybench.flows._stage import run_one_stage


@flow(name="rouge")
def rouge_flow(
    config_path: str = DEFAULT_CURATE_CONFIG,
    store_root: str = DEFAULT_STORE_ROOT,
    run_id: str | None = None,
    upstream_snapshot_id: str | None = None,
    base_run: str | None = None,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> str:
    """Run rouge; returns the id of the snapshot it wrote."""
    return run_one_stage(
        "rouge", config_path, store_root, run_id, upstream_snapshot_id, base_run,
        lock_timeout_s,
    )
