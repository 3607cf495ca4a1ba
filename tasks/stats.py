"""Prefect task for the stats stage: intervals, rankings and bias monitors of a run."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from essaybench.bench.config import load_benchmark_config
from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S
from essaybench.llm.registry import load_registry
from essaybench.stages.stats import stats_inputs, stats_stage
from essaybench.store import Store


@task(name="stats-stage", cache_policy=NO_CACHE, task_run_name="stats")
def stats_stage_task(run_id: str, config_path: str, store_root: str, base_run: str,
                     judge_snapshot_id: str | None = None,
                     pairwise_snapshot_id: str | None = None,
                     lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
                     registry_path: str | None = None) -> str:
    """``registry_path``: the model registry (None: the default); a sharded run passes
    its plan's (``stages.shard_assemble.write_plan_registry``)."""
    store = Store(store_root, lock_timeout_s)
    config = load_benchmark_config(config_path)
    params = config.stats
    if judge_snapshot_id is not None:
        judged = store.get_snapshot(judge_snapshot_id)
        pairwise = store.get_snapshot(pairwise_snapshot_id) if pairwise_snapshot_id else None
    else:
        judged, pairwise = stats_inputs(store, base_run)
    registry = load_registry(registry_path)
    family_of = {name: spec.family for name, spec in registry.models.items()}
    snapshot, folder = stats_stage(store, run_id, params, judged, pairwise, family_of,
                                   config.flagged_essays)
    get_run_logger().info("stats: snapshot %s from %s%s; report %s/stats.md",
                          snapshot.snapshot_id, judged.snapshot_id,
                          f" and {pairwise.snapshot_id}" if pairwise else "", folder)
    return snapshot.snapshot_id
