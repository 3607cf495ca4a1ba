"""The ``collect`` stage as its own flow: reads the configured raw sources."""

from __future__ import annotations

from prefect import flow

from essaybench.core.settings import (
    DEFAULT_CURATE_CONFIG,
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_STORE_ROOT,
)
from essaybench.flows._stage import run_one_stage


@flow(name="collect")
def collect_flow(
    config_path: str = DEFAULT_CURATE_CONFIG,
    store_root: str = DEFAULT_STORE_ROOT,
    run_id: str | None = None,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> str:
    """Run collect; returns the id of the snapshot it wrote."""
    return run_one_stage("collect", config_path, store_root, run_id, None, None,
                         lock_timeout_s)
