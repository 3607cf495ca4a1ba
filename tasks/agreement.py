"""Prefect tasks for the human-agreement stages (no LLM calls: pure statistics over files)."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from essaybench.bench.agreement_tables import AgreementParams
from essaybench.human.annotations import ScoreScale
from essaybench.human.run_check import RunEssays, checked_file
from essaybench.stages.agreement import agreement_stage
from essaybench.stages.wpb_report import wpb_report_stage
from essaybench.store import Store


@task(name="agreement-stage", cache_policy=NO_CACHE, task_run_name="agreement")
def agreement_stage_task(run_id: str, params: dict[str, object], store_root: str,
                         base_run: str, ignore_unknown: bool = False,
                         scale: tuple[float, float] | None = None) -> str:
    store = Store(store_root)
    judged = store.require_ok_snapshot("judge", base_run, "agreement")
    checked_params = AgreementParams.model_validate(params)
    # Annotations naming what the run lacks, or scores off the scale, stop here with the
    # file and line; rows --ignore-unknown leaves out are kept out of the stage's input.
    path, checked = checked_file(
        checked_params.annotations, checked_params.kind,
        RunEssays.from_judgments(base_run, judged.read()),
        store.root / "reports" / run_id / "agreement", ignore_unknown=ignore_unknown,
        scale=None if scale is None else ScoreScale(*scale))
    log = get_run_logger()
    if checked.note:
        log.warning("%s", checked.note)
    snapshot, folder = agreement_stage(
        store, run_id, checked_params.model_copy(update={"annotations": str(path)}), judged)
    log.info("agreement: snapshot %s; report in %s", snapshot.snapshot_id, folder)
    return snapshot.snapshot_id


@task(name="wpb-report-stage", cache_policy=NO_CACHE, task_run_name="wpb_report")
def wpb_report_stage_task(run_id: str, data_dir: str, store_root: str, seed: int,
                          n_boot: int) -> str:
    snapshot, folder = wpb_report_stage(Store(store_root), run_id, Path(data_dir), seed=seed,
                                        n_boot=n_boot)
    log = get_run_logger()
    for line in snapshot.meta.get("headline", []):
        log.info("wpb: %s", line)
    log.info("wpb_report: snapshot %s; report in %s", snapshot.snapshot_id, folder)
    return snapshot.snapshot_id
