"""Prefect task for the pairwise stage: one task per stage run, LLM calls batched inside."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S
from essaybench.llm.registry import load_registry
from essaybench.llm.session import open_gateway
from essaybench.runs.lineage import run_scope
from essaybench.stages.pairwise import load_pairwise_params, pairwise_stage, pairwise_upstream
from essaybench.store import Store


@task(name="pairwise-stage", cache_policy=NO_CACHE, task_run_name="pairwise")
def pairwise_stage_task(run_id: str, config_path: str, store_root: str,
                        upstream_snapshot_id: str | None, base_run: str | None,
                        lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
                        registry_path: str | None = None) -> str:
    """``registry_path``: the model registry (None: the default); a sharded run passes
    its plan's (``stages.shard_assemble.write_plan_registry``)."""
    store = Store(store_root, lock_timeout_s)
    params = load_pairwise_params(config_path)
    upstream = pairwise_upstream(store, upstream_snapshot_id, base_run)
    with open_gateway(load_registry(registry_path), store.root, params.judges,
                      log_dir=store.root / "logs", scope=run_scope(store, run_id),
                      ledger_lock_timeout_s=lock_timeout_s) as session:
        snapshot = pairwise_stage(store, run_id, params, upstream, session)
        stats = session.gateway.last_stats
    log = get_run_logger()
    log.info("pairwise: snapshot %s (%d rows) from %s; calls sent %s, from ledger %s",
             snapshot.snapshot_id, snapshot.n_rows, upstream.snapshot_id,
             stats.sent if stats else 0, stats.from_ledger if stats else 0)
    for row in snapshot.meta.get("position_bias", []):
        log.info("pairwise bias %s: swap-flip rate %s over %s pairs, first-position win rate "
                 "%s (%s ties)", row["judge"], row["swap_flip_rate"], row["pairs_ok"],
                 row["first_position_win_rate"], row["ties"])
    return snapshot.snapshot_id
