"""Prefect tasks for the curation stages: one task per stage run.

Snapshots in the store are the source of truth for reruns, so Prefect's own
result caching is off.
"""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S
from essaybench.curate.config import load_curate_config
from essaybench.stages.curate import publish_prompt_set, run_curation_stage
from essaybench.store import Store


@task(name="curation-stage", cache_policy=NO_CACHE, task_run_name="{stage}")
def curation_stage_task(
    stage: str, run_id: str, config_path: str, store_root: str, upstream_snapshot_id: str | None,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> str:
    store = Store(store_root, lock_timeout_s)
    upstream = store.get_snapshot(upstream_snapshot_id) if upstream_snapshot_id else None
    snapshot = run_curation_stage(store, run_id, stage, load_curate_config(config_path), upstream)
    get_run_logger().info("%s: wrote snapshot %s (%d rows)", stage, snapshot.snapshot_id,
                          snapshot.n_rows)
    return snapshot.snapshot_id


@task(name="publish-prompt-set", cache_policy=NO_CACHE)
def publish_task(run_id: str, store_root: str, classify_snapshot_id: str,
                 lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> dict[str, object]:
    store = Store(store_root, lock_timeout_s)
    published = publish_prompt_set(store, run_id, store.get_snapshot(classify_snapshot_id))
    get_run_logger().info("prompt set %s: %d prompts", published.version,
                          published.prompt_set.n_prompts)
    return {
        "version": published.version,
        "n_prompts": published.prompt_set.n_prompts,
        "counts": published.prompt_set.counts,
        "funnel": published.funnel.to_dict(),
        "steps": published.funnel.steps(),
        "paths": {k: str(v) for k, v in published.paths.items()},
        "snapshot_id": published.snapshot_id,
        "folder": str(Path(published.paths["jsonl"]).parent),
    }
