"""The ``batch-resume`` flow: resume every pipeline flow run suspended while waiting for
provider batches (``flows/batch_wait.py``). Scheduled by the ``batch-resume`` deployment
(``prefect.yaml``); each resumed run polls its batches once and finishes or suspends again,
so the schedule's interval is the polling interval, and no process waits in between."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prefect import flow, get_run_logger
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterState,
    FlowRunFilterStateName,
    FlowRunFilterTags,
)
from prefect.flow_runs import resume_flow_run

from essaybench.flows.batch_wait import AWAITING_TAG


@flow(name="batch-resume")
def batch_resume_flow(min_suspended_s: float = 0.0) -> list[str]:
    """Resume the suspended runs tagged ``essaybench:awaiting-batch`` that have been
    suspended at least ``min_suspended_s`` seconds; returns their flow run ids."""
    log = get_run_logger()
    since = datetime.now(UTC) - timedelta(seconds=min_suspended_s)
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            tags=FlowRunFilterTags(all_=[AWAITING_TAG]),
            state=FlowRunFilterState(name=FlowRunFilterStateName(any_=["Suspended"]))))
    resumed: list[str] = []
    for run in runs:
        stamp = run.state.timestamp if run.state is not None else None
        if stamp is not None and stamp > since:
            continue
        resume_flow_run(run.id)
        log.info("resumed %s (%s): it polls its batches once", run.name, run.id)
        resumed.append(str(run.id))
    return resumed
