"""Dead shards found by Prefect itself: flow-run heartbeats and a zombie automation.

A shard's flow-run process emits a ``prefect.flow-run.heartbeat`` event every
``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` seconds (the ``pipeline-shard`` deployment sets it to
Prefect's minimum, ``bench.sharding.PREFECT_HEARTBEAT_S``, in its job's environment). The
automation below, Prefect's documented recipe for zombie flow runs limited to shard flow
runs (``docs.prefect.io/v3/advanced/detect-zombie-flows``), marks a shard Crashed
when no heartbeat (nor a final state) followed the last one within ``stale_after_s``: its
worker was killed, its host died or lost the network. The pipeline reads states only and
sends a Crashed shard again, as it does a Failed one (``flows._fanout``).

It needs the server's triggers and actions services (on in ``prefect server start``).
"""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import StateType
from prefect.events.actions import ChangeFlowRunState
from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture
from prefect.events.schemas.events import ResourceSpecification

SHARD_FLOW = "pipeline-shard"
AUTOMATION = "essaybench-crash-silent-shards"
FINAL_EVENTS = ("Completed", "Failed", "Cancelled", "Crashed")


def zombie_automation(stale_after_s: float, flow_name: str = SHARD_FLOW,
                      name: str = AUTOMATION) -> AutomationCore:
    """The automation that crashes a ``flow_name`` flow run silent for ``stale_after_s``."""
    return AutomationCore(
        name=name,
        description=f"Marks a {flow_name} flow run Crashed when it sends no heartbeat for "
                    f"{stale_after_s:g} s (essaybench: the pipeline then sends it again).",
        trigger=EventTrigger(
            after={"prefect.flow-run.heartbeat"},
            expect={"prefect.flow-run.heartbeat",
                    *(f"prefect.flow-run.{s}" for s in FINAL_EVENTS)},
            match=ResourceSpecification({"prefect.resource.id": ["prefect.flow-run.*"]}),
            match_related=ResourceSpecification({"prefect.resource.role": "flow",
                                                 "prefect.resource.name": flow_name}),
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=stale_after_s),
        ),
        actions=[ChangeFlowRunState(
            state=StateType.CRASHED, name="Crashed", force=False,
            message=f"no heartbeat for {stale_after_s:g} s: its worker or host is gone")],
    )


def ensure_zombie_automation(stale_after_s: float, flow_name: str = SHARD_FLOW,
                             name: str = AUTOMATION) -> UUID:
    """Creates the automation, or updates it when it differs (another ``stale_after_s``);
    returns its id."""
    wanted = zombie_automation(stale_after_s, flow_name, name)
    with get_client(sync_client=True) as client:
        found = client.read_automations_by_name(name)
        if not found:
            return client.create_automation(wanted)
        first = found[0]
        if (first.trigger, first.actions, first.enabled) != (wanted.trigger, wanted.actions,
                                                             True):
            client.update_automation(first.id, wanted)
        return first.id
