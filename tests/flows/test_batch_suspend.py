"""The weekly deployment with a batched writer, on real processes: a ``prefect server
start``, the process pool of ``prefect.yaml``, ``prefect deploy`` of ``pipeline-weekly``
and ``batch-resume`` from the repository root, and a ``prefect worker start``; the weekly
run as scheduled (it curates first).

The writer's batch (fake server on 127.0.0.1) stays in progress for its first two status
reads, however long they take (``in_progress_polls``: a wait counted in polls, so the test
needs no guess of how fast the machine runs a suspend/resume cycle). The pipeline
run submits it and suspends itself: the flow run is ``Suspended`` with no flow-run process
left (the worker is not occupied), tagged as awaiting a batch. Runs of the ``batch-resume``
deployment (triggered here as its schedule would) resume it; each resumed run polls once and
suspends again while the batch runs, then completes. Across the suspensions the flow run
keeps its name and essaybench run id, the batch is submitted once, every call is recorded
once under that run, the waits are stage runs recorded as ``waiting``, and the run curated
once (a resumed entry does not curate again).
"""

from __future__ import annotations

import time
from pathlib import Path
from uuid import UUID

import duckdb
import psutil  # type: ignore[import-untyped]
import pytest
import yaml
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.objects import FlowRun
from prefect.client.schemas.schedules import IntervalSchedule

from essaybench.flows.batch_wait import AWAITING_TAG
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.store import Store
from essaybench.store.runs import get_run, looks_like_run_id
from tests.helpers import copy_store
from tests.prefect_server import (
    POOL,
    PREFECT,
    Deadline,
    Processes,
    prefect_client,
    wait_until,
)

pytestmark = pytest.mark.slow

BUDGET_S = 420.0
CLI_TIMEOUT_S = 90.0
STEP_TIMEOUT_S = 120.0
HELD_POLLS = 2  # the writer's batch answers nothing before its status was read twice


def _files(tmp: Path, fake_url: str) -> tuple[Path, Path]:
    common = {"provider": "fake", "family": "fake", "structured_output": "json_schema",
              "max_concurrency": 4, "timeout_s": 10, "connect_timeout_s": 2,
              "max_retries": 0, "base_url": fake_url}
    models, config = tmp / "models.yaml", tmp / "benchmark.yaml"
    models.write_text(yaml.safe_dump({"models": {
        "writer": {**common, "model_id": "writer", "batch": "openai",
                   "batch_price_factor": 0.5},
        "judge": {**common, "model_id": "judge"}}}), encoding="utf-8")
    config.write_text(yaml.safe_dump({
        "per_genre": 1, "generate": {"models": ["writer"]}, "judge": {"judges": ["judge"]}}),
        encoding="utf-8")
    return models, config


def _engines(procs: Processes) -> list[psutil.Process]:
    """Flow-run processes (``python -m prefect.engine``) this test's worker started."""
    found = []
    for proc in procs.running():
        try:
            if "prefect.engine" in proc.cmdline():
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _read(client: SyncPrefectClient, flow_run_id: UUID) -> FlowRun:
    return client.read_flow_run(flow_run_id)


def _final(client: SyncPrefectClient, flow_run_id: UUID, timeout: float,
           procs: Processes) -> FlowRun:
    def ended() -> bool:
        state = _read(client, flow_run_id).state
        return state is not None and state.is_final()

    wait_until(ended, timeout, f"flow run {flow_run_id} ends", lambda: procs.exited("worker"))
    return _read(client, flow_run_id)


def test_weekly_run_suspends_while_its_batch_runs(curated: Store, prefect_server: str,
                                                  tmp_path: Path) -> None:
    store = copy_store(curated, tmp_path / "store")
    deadline = Deadline(BUDGET_S)
    scenario = FakeScenario.model_validate({"batch": {"in_progress_polls": HELD_POLLS}})
    with run_fake_server(scenario) as fake, Processes(tmp_path / "logs") as procs:
        models, config = _files(tmp_path, fake.base_url)
        api = prefect_server
        cli_env = {"PREFECT_API_URL": api, "PREFECT_HOME": str(tmp_path / "prefect-home")}
        procs.run([PREFECT, "work-pool", "create", POOL, "--type", "process"], cli_env,
                  deadline.left(CLI_TIMEOUT_S))
        procs.run([PREFECT, "--no-prompt", "deploy", "--name", "pipeline-weekly",
                   "--name", "batch-resume"], cli_env, deadline.left(CLI_TIMEOUT_S))
        procs.spawn("worker", [PREFECT, "worker", "start", "--pool", POOL], {
            **cli_env, "ESSAYBENCH_MODELS": str(models),
            "ESSAYBENCH_BENCHMARK_CONFIG": str(config), "ESSAYBENCH_STORE": str(store.root),
            "PREFECT_WORKER_QUERY_SECONDS": "1"})
        alive = lambda: procs.exited("worker")  # noqa: E731
        suspended_states: list[UUID] = []
        idle_checks = 0
        try:
            with prefect_client(api) as client:
                weekly = client.read_deployment_by_name("pipeline/pipeline-weekly")
                resume = client.read_deployment_by_name("batch-resume/batch-resume")
                assert [type(s.schedule) for s in resume.schedules] == [IntervalSchedule]
                run_id = client.create_flow_run_from_deployment(weekly.id).id  # curates
                name = None
                while True:
                    def moved() -> bool:
                        state = _read(client, run_id).state
                        return state is not None and (state.is_final() or (
                            state.name == "Suspended" and state.id not in suspended_states))
                    wait_until(moved, deadline.left(STEP_TIMEOUT_S),
                               "the pipeline run suspends or ends", alive, poll=0.5)
                    run = _read(client, run_id)
                    assert run.state is not None
                    if run.state.is_final():
                        break
                    suspended_states.append(run.state.id)
                    name = name or run.name
                    assert run.name == name and looks_like_run_id(name)  # the same run id
                    assert AWAITING_TAG in run.tags
                    # The process exits; the run stays suspended with none (worker free).
                    wait_until(lambda: not _engines(procs), deadline.left(30),
                               "the suspended run's process exits", alive)
                    still = _read(client, run_id).state
                    assert still is not None and still.id == run.state.id
                    idle_checks += 1
                    time.sleep(2)  # the batch goes on meanwhile, no process waiting for it
                    collector = client.create_flow_run_from_deployment(resume.id).id
                    done = _final(client, collector, deadline.left(STEP_TIMEOUT_S), procs)
                    assert done.state is not None and done.state.is_completed(), done.state
        except AssertionError as failed:
            raise AssertionError(f"{failed}\n--- worker log:\n{procs.tail('worker')}") from None
        stats = fake.stats()
    log = f"\n--- worker log:\n{procs.tail('worker')}"
    assert run.state is not None and run.state.is_completed(), f"{run.state}{log}"
    # one suspension per poll that found the batch open: the first entry's, then a resumed one
    assert len(suspended_states) == HELD_POLLS and idle_checks == HELD_POLLS, log
    assert run.name == name and name is not None  # kept across every resume
    record = get_run(Store(store.root), name)
    assert record is not None and record.flow_run_id == str(run_id)
    assert stats.batch is not None and stats.batch.batches_created == 1
    assert set(stats.batch.batches_per_custom_id) == {"1"}  # no essay in two batches
    with duckdb.connect(str(store.root / "ledger.duckdb"), read_only=True) as con:
        calls = con.execute("SELECT model, batched, run_id, count(*) FROM llm_calls "
                            "GROUP BY ALL ORDER BY model").fetchall()
    judge_sent = stats.per_model["judge"].received
    assert [(m, b, r) for m, b, r, _ in calls] == [("judge", None, name),
                                                   ("writer", True, name)]
    assert calls[0][3] == judge_sent and "writer" not in stats.per_model
    # Each wait was the generate stage's (the judge is direct), recorded as waiting.
    runs = Store(store.root).stage_runs(name, 1000)
    statuses = [r.status for r in runs if r.stage == "generate"]
    assert sorted(statuses) == ["ok", *["waiting"] * len(suspended_states)], statuses
    # The run curated once: a resumed entry reads the prompt set its first entry published.
    assert [r.status for r in runs if r.stage == "classify"] == ["ok"]
