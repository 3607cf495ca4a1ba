"""The weekly schedule as a team runs it, with real processes only: a ``prefect server
start``, the process work pool of ``prefect.yaml``, ``prefect deploy --all`` from the
repository root (the deployments users get), and a ``prefect worker start`` whose
environment points essaybench at a test registry, config and store (README, "Scheduling
your own benchmark"). The weekly deployment is triggered three times against fake
OpenAI-compatible servers on 127.0.0.1:

- week 1 and week 2 both end Completed and each sends every call afresh (2× the calls of
  one run, counted by the fake servers); between them the writer starts answering in
  English under a new model id, and week 2's alerts, compared with week 1, say so and
  reach a webhook receiver on 127.0.0.1 (the other webhook, down, is recorded as not
  delivered);
- week 3 has its judge down: the flow run ends Failed, and its alert is still delivered.

Every process the test starts (CLI commands, worker and the flow-run processes it spawns; the
server is the session's, ``prefect_server``) is stopped at the end, even on failure, and
none is left running; every wait is bounded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import yaml
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
from prefect.client.schemas.objects import Artifact, FlowRun
from prefect.client.schemas.responses import DeploymentResponse
from prefect.client.schemas.schedules import CronSchedule

from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.stages.alerts import run_alerts
from essaybench.store import Store
from essaybench.store.runs import get_run, looks_like_run_id
from essaybench.tasks.alerts import artifact_key
from tests.helpers import Receiver, closed_port_url
from tests.prefect_server import (
    POOL,
    PREFECT,
    SPEC,
    WEEKLY,
    Deadline,
    Processes,
    prefect_client,
    run_deployment_and_wait,
    write_registry,
)

pytestmark = pytest.mark.slow

# Hard limits: each wait has its cap, and all of them together the test's budget (the
# teardown adds at most ~20 s). A run takes ~30 s on a busy 2-core host, the whole ~2.5 min.
BUDGET_S = 270.0
CLI_TIMEOUT_S = 90.0
RUN_TIMEOUT_S = 120.0
ENGLISH = "The door opened and I walked into the quiet morning light, thinking of home."
WEEK2_WRITER = FakeScenario.model_validate({"models": {"writer": {
    "reply": "template", "template": ENGLISH, "returned_model": "writer-2025-06"}}})


def _benchmark_config(path: Path, webhooks: list[str]) -> None:
    path.write_text(yaml.safe_dump({
        "per_genre": 2, "generate": {"models": ["writer"]}, "judge": {"judges": ["judge"]},
        "alerts": {"n_boot": 200, "webhook_timeout_s": 2, "webhooks": webhooks}}),
        encoding="utf-8")


def _received(*servers: FakeServerHandle) -> int:
    return sum(server.stats().totals.received for server in servers)


def _run_weekly(client: SyncPrefectClient, deployment_id: UUID, procs: Processes,
                timeout: float, **parameters: Any) -> FlowRun:
    return run_deployment_and_wait(client, deployment_id, timeout,
                                   lambda: procs.exited("worker"), **parameters)


def _artifact(client: SyncPrefectClient, flow_run: FlowRun, kind: str = "alerts") -> Artifact:
    """The flow run's ``kind`` artifact (each pipeline run has an alerts and a report one)."""
    artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(
        flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run.id])))
    [artifact] = [a for a in artifacts if (a.key or "").startswith(f"{kind}-")]
    return artifact


def _crons(deployment: DeploymentResponse) -> list[tuple[str, str | None]]:
    schedules = [s.schedule for s in deployment.schedules]
    return [(s.cron, s.timezone) for s in schedules if isinstance(s, CronSchedule)]


def _essaybench_run(flow_run: FlowRun) -> str:
    """The essaybench run id the pipeline named its flow run after (and tagged it with)."""
    assert looks_like_run_id(flow_run.name) and flow_run.name in flow_run.tags, flow_run
    return flow_run.name


def _start_stack(procs: Processes, api: str, tmp_path: Path, deadline: Deadline,
                 essaybench_env: dict[str, str]) -> str:
    """README's schedule section, step by step, on the server at ``api``: work pool,
    ``prefect deploy --all`` from the repository root, worker (its environment:
    ``essaybench_env``); the API URL."""
    cli_env = {"PREFECT_API_URL": api, "PREFECT_HOME": str(tmp_path / "prefect-home")}
    procs.run([PREFECT, "work-pool", "create", POOL, "--type", "process"], cli_env,
              deadline.left(CLI_TIMEOUT_S))
    procs.run([PREFECT, "--no-prompt", "deploy", "--all"], cli_env, deadline.left(CLI_TIMEOUT_S))
    # Not started during the deploy: the server's SQLite then answered the worker's
    # heartbeat with "database is locked", and could as well have failed the deploy.
    procs.spawn("worker", [PREFECT, "worker", "start", "--pool", POOL], {
        **cli_env, **essaybench_env,
        "PREFECT_WORKER_QUERY_SECONDS": "1"})  # poll the pool every second, not 10
    return api


def test_weekly_deployment_on_a_real_server_and_worker(prefect_server: str,
                                                       tmp_path: Path) -> None:
    store, registry, config = tmp_path / "store", tmp_path / "models.yaml", tmp_path / "b.yaml"
    deadline = Deadline(BUDGET_S)
    # Processes last: its exit (stopping them all) runs first, before the fakes go away.
    with Receiver() as receiver, run_fake_server() as writer, \
            run_fake_server(WEEK2_WRITER) as writer2, run_fake_server() as judge, \
            Processes(tmp_path / "logs") as procs:
        write_registry(registry, writer.base_url, judge.base_url)
        _benchmark_config(config, [closed_port_url(), receiver.url])
        api = _start_stack(procs, prefect_server, tmp_path, deadline, {
            "ESSAYBENCH_MODELS": str(registry), "ESSAYBENCH_BENCHMARK_CONFIG": str(config),
            "ESSAYBENCH_STORE": str(store)})
        try:
            with prefect_client(api) as client:
                deployment = client.read_deployment_by_name(f"pipeline/{WEEKLY['name']}")
                assert deployment.work_pool_name == POOL
                assert deployment.pull_steps == SPEC["pull"]
                # The store host's queue; shards have their own (docs/scale-out.md, runbook),
                # both served by this worker, started without --work-queue.
                assert deployment.work_queue_name == "default"
                shard = client.read_deployment_by_name("pipeline-shard/pipeline-shard")
                assert (shard.work_pool_name, shard.work_queue_name) == (POOL, "shards")
                assert _crons(deployment) == [(s["cron"], s["timezone"])
                                              for s in WEEKLY["schedules"]]

                # Week 1 as scheduled (the deployment's parameters: it curates the new store).
                week1 = _run_weekly(client, deployment.id, procs, deadline.left(RUN_TIMEOUT_S))
                essays1, calls1 = _received(writer), _received(writer, judge)
                write_registry(registry, writer2.base_url, judge.base_url)
                # Weeks 2 and 3 skip curation (~10 s each here): the prompt set is unchanged.
                week2 = _run_weekly(client, deployment.id, procs, deadline.left(RUN_TIMEOUT_S),
                                    curate=False)
                essays2 = _received(writer2)
                calls2 = _received(writer, writer2, judge) - calls1
                artifact = _artifact(client, week2)
                report = _artifact(client, week2, "report")
                write_registry(registry, writer.base_url, closed_port_url())  # the judge is down
                week3 = _run_weekly(client, deployment.id, procs, deadline.left(RUN_TIMEOUT_S),
                                    curate=False)
        except AssertionError as failed:
            raise AssertionError(f"{failed}\n--- worker log:\n{procs.tail('worker')}") from None
    assert procs.running() == []  # server, worker and flow-run processes all stopped

    log = f"\n--- worker log:\n{procs.tail('worker')}"
    assert week1.state is not None and week1.state.is_completed(), f"{week1.state}{log}"
    assert week2.state is not None and week2.state.is_completed(), f"{week2.state}{log}"
    assert week3.state is not None and week3.state.is_failed(), f"{week3.state}{log}"
    assert "is unhealthy" in (week3.state.message or "")
    assert {week1.deployment_id, week2.deployment_id, week3.deployment_id} == {deployment.id}
    assert week1.parameters["curate"] is True  # the deployment's own parameters
    # Week 2 sent every call again, essays and judgments: 2× the calls of one run in all.
    assert essays1 > 0 and essays2 == essays1 and calls2 == calls1 > essays1

    one, two, three = map(_essaybench_run, (week1, week2, week3))
    bench = Store(store)
    for flow_run, run_id in ((week1, one), (week2, two), (week3, three)):
        record = get_run(bench, run_id)
        assert record is not None and record.flow_run_id == str(flow_run.id)
    assert run_alerts(bench, one).base_run is None  # nothing to compare with: no alert
    alerts2 = run_alerts(bench, two)
    assert alerts2.base_run == one
    assert {"off_language", "model_id_changed"} <= {a.kind for a in alerts2.alerts}
    assert [d.startswith("NOT delivered") for d in alerts2.deliveries] == [True, False]
    assert artifact.key == artifact_key(two) and artifact.type == "markdown"
    assert f"Compared with run {one}" in str(artifact.data)
    assert f"/reports/{two}/report.html" in str(report.data)  # the run's HTML page
    alerts3 = run_alerts(bench, three)  # the failed week against the last healthy one
    assert alerts3.base_run == two and "model_id_changed" in {a.kind for a in alerts3.alerts}
    assert [(b["run_id"], b["n_alerts"]) for b in receiver.bodies] == [
        (two, len(alerts2.alerts)), (three, len(alerts3.alerts))]
