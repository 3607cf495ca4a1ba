"""Prefect's own heartbeats show a shard alive (``sharding.liveness: prefect``): the
pipeline installs the zombie automation on the real server, once, for shard flow runs
only; the shard deployment beats as often as Prefect allows."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from uuid import uuid4

import pytest
import yaml
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import StateType
from prefect.events.actions import ChangeFlowRunState
from prefect.events.schemas.automations import EventTrigger, Posture
from prefect.events.schemas.events import ResourceSpecification

from essaybench.bench.sharding import PREFECT_HEARTBEAT_S, ShardingParams
from essaybench.core.paths import PROJECT_ROOT
from essaybench.tasks.zombies import SHARD_FLOW, ensure_zombie_automation


@pytest.fixture
def name(prefect_engine: None) -> Iterator[str]:
    automation = f"test-zombies-{uuid4().hex[:8]}"
    yield automation
    with get_client(sync_client=True) as client:
        for found in client.read_automations_by_name(automation):
            client.delete_automation(found.id)


def test_the_zombie_automation_is_installed_once_and_follows_stale_after_s(name: str) -> None:
    first = ensure_zombie_automation(90, name=name)
    assert ensure_zombie_automation(90, name=name) == first  # found, not made again
    with get_client(sync_client=True) as client:
        [automation] = client.read_automations_by_name(name)
    trigger = automation.trigger
    assert isinstance(trigger, EventTrigger)
    assert trigger.posture == Posture.Proactive and trigger.within == timedelta(seconds=90)
    assert trigger.after == {"prefect.flow-run.heartbeat"}
    assert "prefect.flow-run.heartbeat" in trigger.expect
    assert "prefect.flow-run.Completed" in trigger.expect
    assert trigger.for_each == {"prefect.resource.id"}
    # Only shard flow runs: a silent pipeline run is not crashed by it.
    assert trigger.match_related == ResourceSpecification(
        {"prefect.resource.role": "flow", "prefect.resource.name": SHARD_FLOW})
    [action] = automation.actions
    assert isinstance(action, ChangeFlowRunState) and action.state == StateType.CRASHED
    assert ensure_zombie_automation(120, name=name) == first  # updated in place
    with get_client(sync_client=True) as client:
        [automation] = client.read_automations_by_name(name)
    assert isinstance(automation.trigger, EventTrigger)
    assert automation.trigger.within == timedelta(seconds=120)


def test_shards_beat_every_30_s_and_stale_after_s_allows_two_beats() -> None:
    spec = yaml.safe_load((PROJECT_ROOT / "prefect.yaml").read_text("utf-8"))
    [shard] = [d for d in spec["deployments"] if d["name"] == SHARD_FLOW]
    env = shard["work_pool"]["job_variables"]["env"]
    assert env["PREFECT_FLOWS_HEARTBEAT_FREQUENCY"] == str(PREFECT_HEARTBEAT_S)
    with pytest.raises(ValueError, match="below two of Prefect's flow-run heartbeats"):
        ShardingParams(shards=2, stale_after_s=45)
    assert ShardingParams(shards=2, stale_after_s=45, liveness="parts").stale_after_s == 45
