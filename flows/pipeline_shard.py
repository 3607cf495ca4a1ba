"""The ``pipeline-shard`` flow: one shard of a sharded run's generate+judge, on whichever
worker of the pool picks it up (deployment ``pipeline-shard`` in prefect.yaml). The
parent ``pipeline`` flow starts it through ``run_deployment`` (see ``flows/_fanout.py``);
everything it needs is in the run's plan under ``parts_url``."""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.client.schemas.objects import State
from prefect.runtime import flow_run
from prefect.states import Failed

from essaybench.runs.parts_reach import require_plan_visible
from essaybench.runs.shards import REFUSED_STATE, ShardRefused
from essaybench.store.parts import PartStore
from essaybench.tasks.shard import shard_task


@flow(name="pipeline-shard", flow_run_name="{run_id}-shard{index}")
def pipeline_shard_flow(parts_url: str, run_id: str, index: int,
                        plan_digest: str | None = None) -> dict[str, Any] | State[Any]:
    """``plan_digest``: the digest of the plan the parent made; the shard refuses another
    plan, or one pinned to other code or rubrics (``stages.shard.check_pinned``).

    A refusal ends the flow run in a Failed state named ``Refused`` (its message the
    refusal's one line): the parent's retry loop sends a refused shard no other attempt,
    as each would cost a flow run (~5 CPU-s) and be refused alike. (Prefect's own
    ``retry_condition_fn`` is a task option; the shard's retries are the parent's.)"""
    # The flow run's id names the attempt: the parent knows it (run_deployment returned
    # it) and records it as the shard's owner; see essaybench.stages.shard.
    try:
        require_plan_visible(PartStore(parts_url), run_id)  # a local folder of another host?
        return shard_task(parts_url, run_id, index, str(flow_run.id), plan_digest)
    except ShardRefused as exc:
        return Failed(name=REFUSED_STATE, message=str(exc))
