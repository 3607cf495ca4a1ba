"""The ``calibrate`` flow: the benchmark config's judges score the anchor set, which
becomes each judge's reference for the weekly drift check (``essaybench calibrate``).

A run of its own (recorded in the catalog, fresh calls); run it after changing a judge's
model, endpoint, parameters, rubric or judge prompt — the pipeline refuses a changed judge
until it is calibrated.
"""

from __future__ import annotations

from typing import Any

from prefect import flow

from essaybench.core.settings import (
    DEFAULT_BENCHMARK_CONFIG,
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_STORE_ROOT,
)
from essaybench.store import Store
from essaybench.store.runs import record_run
from essaybench.store.store import new_run_id
from essaybench.tasks.calibrate import calibrate_stage_task


@flow(name="calibrate")
def calibrate_flow(benchmark_config: str = DEFAULT_BENCHMARK_CONFIG,
                   store_root: str = DEFAULT_STORE_ROOT,
                   lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> dict[str, Any]:
    run_id = new_run_id()
    record_run(Store(store_root, lock_timeout_s), run_id, from_stage="calibrate",
               config_path=benchmark_config)
    return {"run_id": run_id,
            **calibrate_stage_task(run_id, benchmark_config, store_root, lock_timeout_s)}
