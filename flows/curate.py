"""The ``curate`` flow: raw sources to a published prompt set.

``from_stage`` restarts at a later stage from the newest successful upstream
snapshot (of ``base_run`` if given); nothing upstream of it is recomputed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect import flow

from essaybench.core.settings import (
    DEFAULT_CURATE_CONFIG,
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_STORE_ROOT,
)
from essaybench.curate.funnel import CURATE_STAGES
from essaybench.flows.classify import classify_flow
from essaybench.flows.collect import collect_flow
from essaybench.flows.dedup import dedup_flow
from essaybench.flows.filter import filter_flow
from essaybench.flows.rouge import rouge_flow
from essaybench.stages.curate import resolve_upstream
from essaybench.store import Store
from essaybench.store.store import new_run_id
from essaybench.tasks.curate import publish_task

STAGE_FLOWS: dict[str, Callable[..., str]] = {
    "collect": collect_flow, "filter": filter_flow, "dedup": dedup_flow,
    "rouge": rouge_flow, "classify": classify_flow,
}


@flow(name="curate")
def curate_flow(
    config_path: str = DEFAULT_CURATE_CONFIG,
    store_root: str = DEFAULT_STORE_ROOT,
    from_stage: str = "collect",
    base_run: str | None = None,
    run_id: str | None = None,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> dict[str, Any]:
    """Run the curation stages from ``from_stage`` and publish the prompt set.
    ``lock_timeout_s``: how long to wait for another process's lock on the store."""
    run_id = run_id or new_run_id()
    upstream = resolve_upstream(Store(store_root, lock_timeout_s), from_stage, base_run)
    snapshot_id = upstream.snapshot_id if upstream else None
    ran: list[str] = []
    for stage in CURATE_STAGES[CURATE_STAGES.index(from_stage):]:
        if stage == "collect":
            snapshot_id = collect_flow(config_path, store_root, run_id,
                                       lock_timeout_s=lock_timeout_s)
        else:
            snapshot_id = STAGE_FLOWS[stage](config_path, store_root, run_id, snapshot_id,
                                             lock_timeout_s=lock_timeout_s)
        ran.append(stage)
    assert snapshot_id is not None
    summary = publish_task(run_id, store_root, snapshot_id, lock_timeout_s)
    return {"run_id": run_id, "stages_run": ran, **summary}
