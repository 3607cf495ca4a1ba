"""Prefect task for the calibrate stage: the judges score the anchor set."""

from __future__ import annotations

from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from essaybench.bench.config import load_benchmark_config
from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S
from essaybench.stages.calibrate import calibrate, calibration_lines
from essaybench.store import Store


@task(name="calibrate-stage", cache_policy=NO_CACHE, task_run_name="calibrate")
def calibrate_stage_task(run_id: str, config_path: str, store_root: str,
                         lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> dict[str, Any]:
    """Returns the snapshot id and the per-judge lines ``essaybench calibrate`` prints."""
    snapshot, meta = calibrate(Store(store_root, lock_timeout_s), run_id,
                               load_benchmark_config(config_path))
    lines = calibration_lines(meta)
    log = get_run_logger()
    for line in lines:
        log.info("%s", line)
    return {"snapshot": snapshot.snapshot_id, "lines": lines}
