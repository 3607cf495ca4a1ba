"""Prefect task for the benchmark stages: one task per stage run, or per run of
consecutive stages that share a gateway session (the pipeline's generate+judge).

LLM calls run as coroutines inside the task (the gateway batches them), never one
Prefect task per request.
"""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from essaybench.bench.config import load_benchmark_config
from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S
from essaybench.llm.batch.route import BatchesPending, BatchWaiting
from essaybench.report.adaptive import adaptive_lines, adaptive_view
from essaybench.runs.calibration import run_drift
from essaybench.stages.drift import drift_lines
from essaybench.stages.pipeline import run_stages
from essaybench.store import Store

WAITING = "waiting"  # the result's key when the stages wait for provider batches


@task(name="benchmark-stages", cache_policy=NO_CACHE, task_run_name="{stages}")
def benchmark_stages_task(stages: str, run_id: str, config_path: str, store_root: str,
                          upstream_snapshot_id: str | None,
                          uncalibrated_ok: bool = False,
                          lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
                          batch_waiting: BatchWaiting = "poll") -> dict[str, str]:
    """``stages``: consecutive stage names joined by "+" (e.g. "generate+judge"); returns
    each stage's snapshot id. ``batch_waiting``
    "return": while provider batches are open, returns ``{WAITING: what it waits for}``
    instead (the flow suspends: ``flows/batch_wait.py``)."""
    store = Store(store_root, lock_timeout_s)
    upstream = (store.get_snapshot(upstream_snapshot_id) if upstream_snapshot_id is not None
                else None)
    log = get_run_logger()
    try:
        snapshots = run_stages(store, run_id, load_benchmark_config(config_path),
                               stages.split("+"), upstream, uncalibrated_ok,
                               batch_waiting=batch_waiting)
    except BatchesPending as pending:
        log.info("%s: waiting for provider batches: %s", stages, pending)
        return {WAITING: str(pending)}
    for stage, snapshot in snapshots.items():
        meta = snapshot.meta or {}
        if stage == "drift":  # the verdicts are the run's, in its catalog row
            for line in drift_lines(run_drift(store, run_id) or {}):
                log.info("%s", line)
            continue
        if stage == "adaptive":  # what adaptive sampling decided (a scheduled run's only say)
            view = adaptive_view(store, run_id)
            for line in adaptive_lines(view) if view is not None else []:
                log.info("%s", line)
            continue
        log.info("%s: snapshot %s (%d rows)%s", stage, snapshot.snapshot_id, snapshot.n_rows,
                 f"; judge calls sent while generating: {meta['follow_ups']}"
                 if "follow_ups" in meta else "")
    return {stage: snapshot.snapshot_id for stage, snapshot in snapshots.items()}
