"""Prefect tasks of a sharded run: the plan and the merge (parent), one shard (worker).
Each is one task: a shard's hundreds of calls run as coroutines inside it."""

from __future__ import annotations

from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from essaybench.bench.config import load_benchmark_config
from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S
from essaybench.llm.registry import load_registry
from essaybench.stages.shard import check_merged, merge_ledgers, read_plan, run_shard, write_plan
from essaybench.store import Store
from essaybench.store.parts import PartStore


@task(name="shard-plan", cache_policy=NO_CACHE)
def shard_plan_task(run_id: str, config_path: str, store_root: str, parts_url: str,
                    shards: int, parallel: int | None = None,
                    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> int:
    """Writes (or finds) the run's plan; returns its number of shards."""
    plan = write_plan(Store(store_root, lock_timeout_s), PartStore(parts_url), run_id,
                      load_benchmark_config(config_path), load_registry(), shards, parallel)
    get_run_logger().info("run %s: %d shards, plan at %s", run_id, len(plan.shards),
                          parts_url)
    return len(plan.shards)


@task(name="shard", cache_policy=NO_CACHE, task_run_name="shard={index}")
def shard_task(parts_url: str, run_id: str, index: int,
               attempt: str | None = None) -> dict[str, Any]:
    record = run_shard(PartStore(parts_url), run_id, index, attempt)
    get_run_logger().info("shard %d of run %s: %d essays, %d judgments, %d calls sent%s",
                          index, run_id, record["essays"], record["judgments"],
                          record["sent"], " (already done)" if record.get("already_done")
                          else "")
    return record


@task(name="shard-merge", cache_policy=NO_CACHE)
def merge_task(run_id: str, store_root: str, parts_url: str,
               lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> dict[str, Any]:
    """Appends the shards' ledgers to the store's ledger; returns the plan's start (the
    parent's replay serves failures recorded since) and the counts."""
    parts = PartStore(parts_url)
    plan = read_plan(parts, run_id)
    assert plan is not None
    counts = merge_ledgers(Store(store_root, lock_timeout_s), parts, plan)
    get_run_logger().info("run %s: merged %d ledger rows of %d shards (%d new)", run_id,
                          counts["rows"], counts["shards"], counts["added"])
    return {**counts, "since": plan.created_at.isoformat()}


@task(name="shard-check", cache_policy=NO_CACHE)
def check_merged_task(run_id: str, store_root: str, parts_url: str,
                      snapshots: dict[str, str]) -> None:
    """The parent's generate and judge snapshots hold exactly the shards' rows."""
    parts = PartStore(parts_url)
    plan = read_plan(parts, run_id)
    assert plan is not None
    store = Store(store_root)
    for stage in ("generate", "judge"):
        check_merged(parts, plan, stage, store.get_snapshot(snapshots[stage]).read())
