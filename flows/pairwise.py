"""The ``pairwise`` stage as its own flow: a run's essays compared in order-swapped pairs."""

from __future__ import annotations

from prefect import flow

from essaybench.core.settings import (
    DEFAULT_BENCHMARK_CONFIG,
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_STORE_ROOT,
)
from essaybench.store.store import new_run_id
from essaybench.tasks.pairwise import pairwise_stage_task


@flow(name="pairwise")
def pairwise_flow(
    config_path: str = DEFAULT_BENCHMARK_CONFIG,
    store_root: str = DEFAULT_STORE_ROOT,
    run_id: str | None = None,
    upstream_snapshot_id: str | None = None,
    base_run: str | None = None,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> str:
    """Run pairwise on ``upstream_snapshot_id`` (a generate snapshot), else on the newest
    successful generate snapshot of ``base_run`` (of any run when unset); returns the id
    of the snapshot it wrote. ``config_path``: the pairwise settings, at the top level or
    under ``pairwise:``."""
    return pairwise_stage_task(run_id or new_run_id(), config_path, store_root,
                               upstream_snapshot_id, base_run, lock_timeout_s)
