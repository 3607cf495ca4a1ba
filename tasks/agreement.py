"""Prefect tasks for the human-agreement stages (no LLM calls: pure statistics over files)."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from essaybench.bench.agreement_tables import AgreementParams
from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S
from essaybench.stages.agreement import agreement_stage
from essaybench.stages.wpb_report import wpb_report_stage
from essaybench.store import Store


@task(name="agreement-stage", cache_policy=NO_CACHE, task_run_name="agreement")
def agreement_stage_task(run_id: str, params: dict[str, object], store_root: str,
                         base_run: str, lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> str:
    store = Store(store_root, lock_timeout_s)
    judged = store.require_ok_snapshot("judge", base_run, "agreement")
    snapshot, folder = agreement_stage(store, run_id, AgreementParams.model_validate(params),
                                       judged)
    log = get_run_logger()
    if snapshot.meta.get("note"):  # what ignore_unknown left out
        log.warning("%s", snapshot.meta["note"])
    log.info("agreement: snapshot %s; report in %s", snapshot.snapshot_id, folder)
    return snapshot.snapshot_id


@task(name="wpb-report-stage", cache_policy=NO_CACHE, task_run_name="wpb_report")
def wpb_report_stage_task(run_id: str, data_dir: str, store_root: str, seed: int,
                          n_boot: int, lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> str:
    snapshot, folder = wpb_report_stage(Store(store_root, lock_timeout_s), run_id,
                                        Path(data_dir), seed=seed, n_boot=n_boot)
    log = get_run_logger()
    for line in snapshot.meta.get("headline", []):
        log.info("wpb: %s", line)
    log.info("wpb_report: snapshot %s; report in %s", snapshot.snapshot_id, folder)
    return snapshot.snapshot_id
