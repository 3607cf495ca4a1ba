"""Prefect tasks for the benchmark stages: one task per stage run.

LLM calls run as coroutines inside the task (the gateway batches them), never one
Prefect task per request.
"""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from essaybench.benchmark import (
    aggregate_stage,
    generate_stage,
    judge_stage,
    load_benchmark_config,
)
from essaybench.llm.registry import load_registry
from essaybench.llm.session import open_gateway
from essaybench.store import Store


@task(name="benchmark-stage", cache_policy=NO_CACHE, task_run_name="{stage}")
def benchmark_stage_task(stage: str, run_id: str, config_path: str, store_root: str,
                         upstream_snapshot_id: str | None, prefetch_judge: bool = False) -> str:
    store = Store(store_root)
    config = load_benchmark_config(config_path)
    log = get_run_logger()
    if stage == "aggregate":
        assert upstream_snapshot_id is not None
        snapshot, folder = aggregate_stage(store, run_id, store.get_snapshot(upstream_snapshot_id))
        log.info("aggregate: reports in %s", folder)
        return snapshot.snapshot_id
    with open_gateway(load_registry(), store.root, config.models(),
                      log_dir=store.root / "logs") as session:
        if stage == "generate":
            snapshot = generate_stage(store, run_id, config, session,
                                      prefetch_judge=prefetch_judge)
        else:
            assert upstream_snapshot_id is not None
            snapshot = judge_stage(store, run_id, config, store.get_snapshot(upstream_snapshot_id),
                                   session)
        stats = session.gateway.last_stats
    log.info("%s: snapshot %s (%d rows); calls sent %s, from ledger %s; judge calls "
             "prefetched %s", stage, snapshot.snapshot_id, snapshot.n_rows,
             stats.sent if stats else 0, stats.from_ledger if stats else 0,
             stats.follow_ups_sent if stats else 0)
    return snapshot.snapshot_id
