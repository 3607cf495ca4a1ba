"""The ``wpb_report`` stage as a flow: the WritingPreferenceBench human-label report."""

from __future__ import annotations

from prefect import flow

from essaybench.core.paths import default_wpb_dir
from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S, DEFAULT_STORE_ROOT
from essaybench.store.store import new_run_id
from essaybench.tasks.agreement import wpb_report_stage_task


@flow(name="wpb_report")
def wpb_report_flow(
    data_dir: str | None = None,
    store_root: str = DEFAULT_STORE_ROOT,
    run_id: str | None = None,
    seed: int = 0,
    n_boot: int = 2000,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> str:
    """Build the report from ``data_dir`` (default: ../shared/data/writingpreferencebench)."""
    return wpb_report_stage_task(run_id or new_run_id(), data_dir or str(default_wpb_dir()),
                                 store_root, seed, n_boot, lock_timeout_s)
