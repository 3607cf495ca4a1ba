"""``python -m ops.local_stack`` as README's "Running on several machines" uses it: a private
PostgreSQL, a Prefect server on it, the process pool of ``prefect.yaml`` with a concurrency
limit, two workers split as the multi-host runbook says (``--store-worker``: worker-1 alone
serves the default queue); ``prefect deploy --all`` against it, one weekly-pipeline flow run
on fake OpenAI-compatible servers through the pool, which only worker-1 may take; then
``stop --purge``.

It checks that the run completed, that the server's bookkeeping is in that PostgreSQL (the
flow run's row, read with psql from the database itself), that the pool has its limit and
two online workers, and that after ``stop`` none of the processes the stack started runs
(each carries this test's tag) and the database files are gone. Every wait is bounded; on
failure the stack is stopped all the same, and the tag sweep of ``Processes`` runs last.

With ``--netns`` (root), the same stack with each worker in a network namespace of its own:
each worker process runs in its namespace, a trivial flow run (deployed through the API, no
``prefect deploy``) completes in one of them, where a service on the bridge's address answers
and the same on the host's 127.0.0.1 does not, and ``stop`` leaves no process, namespace or
link.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml
from prefect import flow

from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.server import run_fake_server
from ops import local_stack, netns, postgres
from tests.prefect_server import (
    POOL,
    PREFECT,
    WEEKLY,
    Deadline,
    Processes,
    prefect_client,
    run_deployment_and_wait,
    write_registry,
)

pytestmark = pytest.mark.slow

WORKERS = 2
POOL_LIMIT = 2
# Measured here on a busy 2-core host: the stack starts in ~30 s, the deploy ~15 s, the run
# ~30 s; the whole test ~1.5 min. Each wait has its cap, all together the budget.
BUDGET_S = 240.0
START_TIMEOUT_S = 100.0
CLI_TIMEOUT_S = 90.0
RUN_TIMEOUT_S = 100.0
STOP_TIMEOUT_S = 60.0


def _postgres_or_skip() -> None:
    try:
        postgres.find_bindir()
    except FileNotFoundError as missing:
        pytest.skip(f"{missing} (./dev test installs it when run as root)")


def _stack(*command: str) -> list[str]:
    return [sys.executable, "-m", "ops.local_stack", *command]


def test_weekly_run_through_a_pool_of_two_workers_on_postgres(tmp_path: Path) -> None:
    _postgres_or_skip()
    stack_dir, store = tmp_path / "stack", tmp_path / "store"
    registry, config = tmp_path / "models.yaml", tmp_path / "bench.yaml"
    config.write_text(yaml.safe_dump({
        "per_genre": 2, "generate": {"models": ["writer"]}, "judge": {"judges": ["judge"]},
        "alerts": {"n_boot": 200, "webhooks": []}}), encoding="utf-8")
    deadline, t0 = Deadline(BUDGET_S), time.monotonic()
    took: dict[str, float] = {}

    def lap(name: str) -> None:
        took[name] = round(time.monotonic() - t0 - sum(took.values()), 1)
    with run_fake_server() as writer, run_fake_server() as judge, \
            Processes(tmp_path / "logs") as procs:
        write_registry(registry, writer.base_url, judge.base_url)
        try:
            procs.run(_stack("start", "--dir", str(stack_dir), "--workers", str(WORKERS),
                             "--pool-limit", str(POOL_LIMIT), "--no-ui", "--store-worker",
                             "--timeout", str(deadline.left(START_TIMEOUT_S) - 5)), {
                "ESSAYBENCH_MODELS": str(registry), "ESSAYBENCH_BENCHMARK_CONFIG": str(config),
                "ESSAYBENCH_STORE": str(store),
                "PREFECT_WORKER_QUERY_SECONDS": "1"},  # poll the pool every second, not 10
                deadline.left(START_TIMEOUT_S))
            lap("start")
            state = local_stack.read_state(stack_dir)
            assert state is not None and state.api_url and state.postgres
            api, cluster = state.api_url, state.postgres
            assert set(state.processes) == {"server", "worker-1", "worker-2"}
            procs.run([PREFECT, "--no-prompt", "deploy", "--all"], {
                "PREFECT_API_URL": api, "PREFECT_HOME": str(tmp_path / "prefect-home")},
                deadline.left(CLI_TIMEOUT_S))
            lap("deploy")
            with prefect_client(api) as client:
                pool = client.read_work_pool(POOL)
                workers = client.read_workers_for_work_pool(POOL)
                deployment = client.read_deployment_by_name(f"pipeline/{WEEKLY['name']}")
                run = run_deployment_and_wait(
                    client, deployment.id, deadline.left(RUN_TIMEOUT_S),
                    lambda: local_stack.gone(state))
            lap("run")
            # The server's own database: the flow run's row, read from PostgreSQL itself.
            row = postgres.query(cluster, "SELECT state_type, deployment_id FROM flow_run "
                                          f"WHERE id = '{run.id}'")
            sent = writer.stats().totals.received, judge.stats().totals.received
        finally:
            done = procs.run(_stack("stop", "--dir", str(stack_dir), "--purge"), {},
                             STOP_TIMEOUT_S)
            lap("stop")
            print(f"seconds per phase: {took}")  # shown with pytest -s
        logs = "".join(f"\n--- {log.name}:\n{log.read_text(errors='replace')[-3000:]}"
                       for log in sorted((stack_dir / "logs").glob("worker-*.log")))
        # Stopped by the script itself, before the test's own sweep on leaving the block.
        assert done.strip().endswith("stopped"), done
        assert procs.running() == [], procs.running()
        assert postgres.postmaster_pid(cluster) is None
        assert not Path(cluster.root).exists()
    assert run.state is not None and run.state.is_completed(), f"{run.state}{logs}"
    assert row == f"COMPLETED|{deployment.id}"
    # The runbook's pinning (--store-worker): only worker-1 serves the default queue, so
    # the weekly run went there, whichever worker polled first.
    submitted = {k: f"submittingflowrun'{run.id}'" in "".join((  # however the log wraps
        stack_dir / "logs" / f"worker-{k}.log").read_text(errors="replace").split())
        for k in range(1, WORKERS + 1)}
    assert submitted == {1: True, **{k: False for k in range(2, WORKERS + 1)}}, submitted
    assert pool.concurrency_limit == POOL_LIMIT and pool.type == "process"
    assert sorted(w.status.value for w in workers) == ["ONLINE"] * WORKERS
    # 2 prompts × 4 genres and 2 that leave the genre open (configs/curate.yaml keeps them),
    # each essay judged, those 2 after a genre call
    assert sent[0] == 10 and sent[1] >= 10 + 2


@flow(name="netns-probe")
def netns_probe(out: str, urls: list[str]) -> None:
    """Writes down the network namespace its flow-run process runs in and what each URL
    answers (a status code, or the error's type)."""
    answers = []
    for url in urls:
        try:
            answers.append(str(httpx.get(url, timeout=3, trust_env=False).status_code))
        except httpx.HTTPError as failed:
            answers.append(type(failed).__name__)
    Path(out).write_text(json.dumps([os.readlink("/proc/self/ns/net"), *answers]), "utf-8")


def _netns_inode(path: str) -> str:
    return f"net:[{os.stat(path).st_ino}]"


def test_workers_in_network_namespaces_run_a_flow_and_stop_leaves_nothing(
        tmp_path: Path) -> None:
    _postgres_or_skip()
    if (reason := netns.unavailable()) is not None:
        pytest.skip(reason)
    stack_dir, out = tmp_path / "stack", tmp_path / "probe.txt"
    deadline, t0 = Deadline(BUDGET_S), time.monotonic()
    started = ran = 0.0
    with Processes(tmp_path / "logs") as procs:
        try:
            procs.run(_stack("start", "--dir", str(stack_dir), "--workers", str(WORKERS),
                             "--pool-limit", str(POOL_LIMIT), "--no-ui", "--netns",
                             "--timeout", str(deadline.left(START_TIMEOUT_S) - 5)),
                      {"PREFECT_WORKER_QUERY_SECONDS": "1"}, deadline.left(START_TIMEOUT_S))
            started = time.monotonic() - t0
            state = local_stack.read_state(stack_dir)
            assert state is not None and state.api_url and state.netns and state.postgres
            net, cluster = state.netns, state.postgres
            assert state.api_url.startswith(f"http://{state.host_address}:")
            assert state.host_address == net.host_address != "127.0.0.1"
            inside = {_netns_inode(f"/run/netns/{net.namespace(k)}") for k in net.indices}
            assert [os.readlink(f"/proc/{state.processes[f'worker-{k}']}/ns/net")
                    for k in net.indices] == [_netns_inode(f"/run/netns/{net.namespace(k)}")
                                             for k in net.indices]
            # A service the flows call, on the bridge address; the same on host loopback.
            with prefect_client(state.api_url) as client, \
                    run_fake_server(host=state.host_address) as service, \
                    run_fake_server() as on_loopback:
                flow_id = client.create_flow_from_name("netns-probe")
                deployment = client.create_deployment(
                    flow_id, "netns-probe", work_pool_name=POOL,
                    entrypoint=f"{Path(__file__).relative_to(PROJECT_ROOT)}:netns_probe",
                    pull_steps=[{"prefect.deployments.steps.set_working_directory": {
                        "directory": str(PROJECT_ROOT)}}],
                    parameter_openapi_schema={"type": "object", "properties": {
                        "out": {"type": "string"}, "urls": {"type": "array"}}},
                    enforce_parameter_schema=False)
                run = run_deployment_and_wait(
                    client, deployment, deadline.left(RUN_TIMEOUT_S),
                    lambda: local_stack.gone(state), out=str(out),
                    urls=[f"{service.base_url}/models", f"{on_loopback.base_url}/models"])
            ran = time.monotonic() - t0 - started
        finally:
            done = procs.run(_stack("stop", "--dir", str(stack_dir), "--purge"), {},
                             STOP_TIMEOUT_S)
            print(f"start {started:.1f} s, run {ran:.1f} s, "  # shown with pytest -s
                  f"stop {time.monotonic() - t0 - started - ran:.1f} s")
        logs = "".join(f"\n--- {log.name}:\n{log.read_text(errors='replace')[-3000:]}"
                       for log in sorted((stack_dir / "logs").glob("worker-*.log")))
        assert done.strip().endswith("stopped"), done
        assert procs.running() == [], procs.running()
        assert postgres.postmaster_pid(cluster) is None
    assert run.state is not None and run.state.is_completed(), f"{run.state}{logs}"
    where, bridged, loopback = json.loads(out.read_text(encoding="utf-8"))
    assert where in inside  # the flow ran in a worker's namespace
    assert (bridged, loopback) == ("200", "ConnectError")  # the host only at the bridge
    assert netns.leftovers(net) == []
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                            check=True).stdout + subprocess.run(
        ["ip", "link", "show"], capture_output=True, text=True, check=True).stdout
    assert f"-{net.id}" not in listed, listed
    stopped = local_stack.read_state(stack_dir)
    assert stopped is not None and stopped.netns is None
