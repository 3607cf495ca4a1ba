"""The parent's fan-out against a real Prefect server (the session's ephemeral one) and a
shard deployment no worker serves: a shard that never starts fails the run after
``start_deadline_s`` with one line naming it, its flow run cancelled; a shard whose flow
run ends ``Refused`` fails the run at once, never sent again, and the shards not yet
started are cancelled (issue 31 items 4 and 2). Nothing here starts a flow-run process."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from uuid import UUID, uuid4

import pytest
from prefect import flow
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
from prefect.client.schemas.objects import FlowRun
from prefect.states import Failed

from essaybench.bench.sharding import ShardingParams
from essaybench.flows._fanout import refusal, refuse_slot_conflict, run_shards
from essaybench.flows.pipeline_shard import pipeline_shard_flow
from essaybench.runs.shards import REFUSED_STATE
from essaybench.stages.shard import ShardError
from essaybench.store.parts import PartStore

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_engine")]


def _deployment(client: SyncPrefectClient, pool_limit: int | None = None,
                queue: str = "shards") -> tuple[str, UUID]:
    """A shard deployment on ``queue`` of a fresh pool no worker serves."""
    tag = uuid4().hex[:8]
    pool = f"pool-{tag}"
    client.create_work_pool(WorkPoolCreate(name=pool, type="process",
                                           concurrency_limit=pool_limit))
    flow_id = client.create_flow_from_name(f"shard-{tag}")
    deployment_id = client.create_deployment(
        flow_id=flow_id, name="shard", work_pool_name=pool, work_queue_name=queue,
        entrypoint="essaybench.flows.pipeline_shard:pipeline_shard_flow")
    return f"shard-{tag}/shard", deployment_id


def _runs(client: SyncPrefectClient, deployment_id: UUID) -> list[FlowRun]:
    return list(client.read_flow_runs(deployment_filter=DeploymentFilter(
        id=DeploymentFilterId(any_=[deployment_id]))))


@flow
def _parent(parts_url: str, n: int, params: ShardingParams) -> dict[int, int]:
    return run_shards(PartStore(parts_url), "r1", n, params, poll_s=0.1)


def test_a_shard_that_never_starts_fails_the_run_in_one_line_and_is_cancelled(
        tmp_path: Path) -> None:
    with get_client(sync_client=True) as client:
        name, deployment_id = _deployment(client)
        params = ShardingParams(shards=2, deployment=name, start_deadline_s=0.5)
        state = _parent(str(tmp_path / "parts"), 2, params, return_state=True)
        runs = _runs(client, deployment_id)
    assert state.is_failed()
    message = state.message or ""
    assert "\n" not in message
    ids = sorted(str(r.id) for r in runs)
    assert len(ids) == 2  # one attempt each: a shard that never started is not sent again
    assert re.search(r"run r1: 2 shard\(s\) never started in \d+ s \(shard 0: flow run "
                     r"\S+ (Scheduled|Late); shard 1: flow run \S+ (Scheduled|Late)\); "
                     r"cancelled them\. Check that a worker is running and serves the "
                     r"work queue 'shards' of the work pool 'pool-\w+'", message), message
    assert all(i in message for i in ids)
    assert all(r.state is not None and r.state.is_cancelled() for r in runs)


def test_a_refused_shard_fails_the_run_at_once_and_is_not_sent_again(
        tmp_path: Path) -> None:
    line = "shard 0 of run r1: this worker runs essaybench 1, the plan was made with 2"
    with get_client(sync_client=True) as client:
        name, deployment_id = _deployment(client)
        params = ShardingParams(shards=2, deployment=name, retries=2, start_deadline_s=30)

        def refuse() -> None:  # what shard 0's flow run ends in on a worker (below)
            for _ in range(100):
                runs = [r for r in _runs(client, deployment_id)
                        if r.parameters["index"] == 0]
                if runs:
                    client.set_flow_run_state(runs[0].id, Failed(
                        name=REFUSED_STATE, message=line), force=True)
                    return
                time.sleep(0.05)

        worker = threading.Thread(target=refuse)
        worker.start()
        state = _parent(str(tmp_path / "parts"), 2, params, return_state=True)
        worker.join()
        runs = _runs(client, deployment_id)
    assert state.is_failed()
    assert (state.message or "").endswith(f": {line} (not sent again)")
    by_index = {r.parameters["index"]: r for r in runs}
    assert len(runs) == 2 == len(by_index)  # retries=2, yet one attempt each
    assert by_index[0].state is not None and by_index[1].state is not None
    assert by_index[0].state.name == REFUSED_STATE
    assert by_index[1].state.is_cancelled()  # never started: cancelled with the run


def test_a_shard_that_cannot_see_the_plan_ends_refused(tmp_path: Path) -> None:
    """The shard flow itself, under the engine: a local part store without the run's plan
    (another host's folder) ends the run Failed, named Refused, the one line its message."""
    state = pipeline_shard_flow(str(tmp_path / "parts"), "r1", 0, return_state=True)
    assert state.is_failed() and state.name == REFUSED_STATE
    assert refusal(state) == state.message
    assert (state.message or "").startswith("shard of run r1 on host ")
    assert refusal(Failed(message="boom")) is None  # an ordinary failure is retried


def test_a_parent_on_its_shards_pool_is_refused_when_they_would_have_no_slot() -> None:
    """The parent is a flow run of a deployment on the shards' pool and queue, with limit
    2: with parallel 2 it would hold a slot they need (refused, one line); parallel 1 fits.
    The parent's own flow run is a real one of that pool (not started: nothing runs)."""
    with get_client(sync_client=True) as client:
        name, deployment_id = _deployment(client, pool_limit=2)
        parent = client.create_flow_run_from_deployment(deployment_id)
        assert parent.work_pool_name is not None
        with pytest.raises(ShardError) as refused:
            refuse_slot_conflict(client, ShardingParams(shards=4, parallel=2,
                                                        deployment=name), 4, str(parent.id))
        refuse_slot_conflict(client, ShardingParams(shards=4, parallel=1, deployment=name),
                             4, str(parent.id))
        refuse_slot_conflict(client, ShardingParams(shards=4, deployment=name), 4, None)
    assert str(refused.value) == (
        f"the work pool {parent.work_pool_name!r} has a concurrency limit of 2, and this "
        f"pipeline run holds one of its slots while its 2 shard(s) at once ({name}) need "
        "the others: raise the limit to at least 3, set sharding.parallel to 1 or less, or "
        'run the pipeline on another queue or pool (docs/scale-out.md, "Runbook: two or '
        'three hosts")')
