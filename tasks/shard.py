"""Prefect tasks of a sharded run: the plan and the assembly (parent), one shard (worker).
Each is one task: a shard's hundreds of calls run as coroutines inside it."""

from __future__ import annotations

from typing import Any, Literal

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from essaybench.bench.config import load_benchmark_config
from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S
from essaybench.llm.registry import ModelSpec, load_registry
from essaybench.llm.shared_limits import shared_limiters
from essaybench.runs.calibration import run_drift
from essaybench.runs.shards import ShardPlan
from essaybench.stages.drift import drift_lines
from essaybench.stages.shard import read_plan, run_shard, write_plan
from essaybench.stages.shard_assemble import assemble_run
from essaybench.store import Store
from essaybench.store.parts import PartStore
from essaybench.tasks.limits import PrefectSlots, publish_limits, require_limits


@task(name="shard-plan", cache_policy=NO_CACHE)
def shard_plan_task(run_id: str, config_path: str, store_root: str, parts_url: str,
                    shards: int, parallel: int | None = None,
                    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
                    limits: Literal["shared", "split"] = "split",
                    liveness: Literal["prefect", "parts"] = "parts") -> tuple[int, str]:
    """Writes (or finds) the run's plan; returns its number of shards and its digest (each
    shard refuses another plan). The config and the registry are read here, once. When
    the plan shares the models' limits, they are published to the Prefect server here,
    before any shard is sent (``tasks.limits``)."""
    plan = write_plan(Store(store_root, lock_timeout_s), PartStore(parts_url), run_id,
                      load_benchmark_config(config_path), load_registry(), shards, parallel,
                      limits, liveness)
    log = get_run_logger()
    log.info("run %s: %d shards, plan %s at %s (code %s)", run_id,
             len(plan.shards), plan.digest, parts_url, plan.code_version)
    if plan.limits == "shared":
        published = publish_limits(plan_specs(plan))
        log.info("run %s: limits shared by its shards: %s", run_id,
                 ", ".join(f"{x.name}={x.limit}" for x in published))
    return len(plan.shards), plan.digest


def plan_specs(plan: ShardPlan) -> list[ModelSpec]:
    return [ModelSpec.model_validate(spec) for spec in plan.specs.values()]


@task(name="shard", cache_policy=NO_CACHE, task_run_name="shard={index}")
def shard_task(parts_url: str, run_id: str, index: int, attempt: str | None = None,
               plan_digest: str | None = None) -> dict[str, Any]:
    parts = PartStore(parts_url)
    plan = read_plan(parts, run_id)
    slots = None
    if plan is not None and plan.limits == "shared":
        require_limits(plan_specs(plan))
        slots = PrefectSlots()
    try:
        record = run_shard(parts, run_id, index, attempt, plan_digest,
                           None if slots is None else shared_limiters(slots))
    finally:
        if slots is not None:
            slots.close()
    get_run_logger().info("shard %d of run %s: %d essays, %d judgments, %d calls sent%s",
                          index, run_id, record["essays"], record["judgments"],
                          record["sent"], " (already done)" if record.get("already_done")
                          else "")
    return record


@task(name="shard-assemble", cache_policy=NO_CACHE)
def assemble_task(run_id: str, store_root: str, parts_url: str, uncalibrated_ok: bool = False,
                  lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> dict[str, str]:
    """Verifies every shard's parts, merges their ledgers and writes the generate and judge
    snapshots (and drift) from them, from the plan alone; returns the snapshot ids."""
    parts = PartStore(parts_url)
    plan = read_plan(parts, run_id)
    assert plan is not None
    snapshots = assemble_run(Store(store_root, lock_timeout_s), parts, plan, uncalibrated_ok)
    log = get_run_logger()
    for stage, snapshot in snapshots.items():
        if stage == "drift":  # the verdicts are the run's, in its catalog row
            for line in drift_lines(run_drift(Store(store_root), run_id) or {}):
                log.info("%s", line)
            continue
        log.info("%s: snapshot %s (%d rows), assembled from %d shards", stage,
                 snapshot.snapshot_id, snapshot.n_rows, len(plan.shards))
    return {stage: snapshot.snapshot_id for stage, snapshot in snapshots.items()}
