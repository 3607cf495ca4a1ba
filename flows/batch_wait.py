"""How a pipeline flow run waits for provider batches (registry ``batch: openai|anthropic``)
without holding a worker for the day a batch may take.

A flow run started from a deployment (the weekly schedule) runs its LLM stages with
``batch_waiting="return"``: the batches are submitted, the direct calls done, each open
batch polled once, and if one is still open the flow run *suspends itself* with Prefect's
``suspend_flow_run``: its process exits (the worker's slot is free) and the run stays
``Paused`` (state name ``Suspended``), tagged :data:`AWAITING_TAG`. The ``batch-resume``
deployment (``flows/batch_resume.py``, on a schedule) resumes such runs; a resumed run
starts the flow again from the top with the same flow run, hence the same name and run id
(``pipeline._flow_run_name``): every step before the wait is served from the catalog and
the call ledger, the batch journal finds the same batches by the run id (nothing is
submitted twice), and the run either finishes or suspends again.

A flow run without a deployment (``essaybench run`` runs the flow in its own process)
cannot be suspended: it polls in its process, with a progress line per poll naming each
open batch and its state.
"""

from __future__ import annotations

from uuid import uuid4

from prefect import get_run_logger
from prefect.client.orchestration import get_client
from prefect.context import FlowRunContext
from prefect.flow_runs import suspend_flow_run

from essaybench.llm.batch.route import BatchWaiting
from essaybench.store import Store

__all__ = ["AWAITING_TAG", "SUSPEND_TIMEOUT_S", "batch_waiting", "curated_already",
           "suspend_for_batches"]

AWAITING_TAG = "essaybench:awaiting-batch"
# A suspended run not resumed within this fails (Prefect's pause timeout): the providers'
# completion window is 24 h, and a run resumed at least daily suspends anew each time.
SUSPEND_TIMEOUT_S = 3 * 86_400


def curated_already(store: Store, run_id: str) -> bool:
    """Whether the newest prompt set was published from this run's own curation: a run
    resumed after waiting for batches does not curate again (at paper scale, minutes of
    CPU on every resume); it reads the prompt set its first entry published."""
    latest = store.latest_prompt_set_version()
    record = store.get_prompt_set(latest) if latest is not None else None
    if record is None:
        return False
    return any(r.stage == "classify" and r.status == "ok"
               and r.snapshot_id == record["snapshot_id"]
               for r in store.stage_runs(run_id, 1000))


def batch_waiting() -> BatchWaiting:
    """"return" (suspend while batches are open) in a deployment's flow run, else "poll"."""
    ctx = FlowRunContext.get()
    run = ctx.flow_run if ctx is not None else None
    return "return" if run is not None and run.deployment_id is not None else "poll"


def suspend_for_batches(waiting: str) -> None:
    """Suspend this flow run until ``batch-resume`` resumes it (raises Prefect's ``Pause``:
    the process exits); ``waiting`` says what it waits for (``Pending.describe``)."""
    ctx = FlowRunContext.get()
    assert ctx is not None and ctx.flow_run is not None, "only inside a flow run"
    run = ctx.flow_run
    if AWAITING_TAG not in run.tags:
        tags = sorted({*run.tags, AWAITING_TAG})
        with get_client(sync_client=True) as client:
            client.update_flow_run(run.id, tags=tags)
        run.tags = tags
    get_run_logger().info("waiting for provider batches: %s; suspending (the batch-resume "
                          "deployment resumes the run)", waiting)
    # A fresh key each time: with the same key Prefect would take a suspension the run
    # already came back from as done and go on without waiting.
    suspend_flow_run(timeout=SUSPEND_TIMEOUT_S, key=f"batches-{uuid4().hex}")
