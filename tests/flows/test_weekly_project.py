"""The weekly deployment of a project made by ``essaybench init``: a real ``prefect
server start``, ``prefect deploy --all`` run in the project folder (its own prefect.yaml),
and a worker started in another folder with no ``ESSAYBENCH_*`` variable at all. The
flow run's pull step enters the project folder, so the run uses the project's
essaybench.toml: its benchmark config and registry (fake servers on 127.0.0.1) and its
store. ``doctor`` is run first against the same server (PREFECT_API_URL)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from essaybench.llm.fake.server import run_fake_server
from essaybench.store import Store
from essaybench.store.runs import get_run, looks_like_run_id
from tests.prefect_server import (
    PREFECT,
    Deadline,
    Processes,
    prefect_client,
    run_deployment_and_wait,
    write_registry,
)

pytestmark = pytest.mark.slow

ESSAYBENCH = str(Path(sys.executable).with_name("essaybench"))
BUDGET_S = 900.0  # a loaded CI host: the server alone took over 90 s here


def test_the_weekly_deployment_of_an_init_project(prefect_server: str, tmp_path: Path) -> None:
    deadline = Deadline(BUDGET_S)
    with run_fake_server() as writer, run_fake_server() as judge, \
            Processes(tmp_path / "logs") as procs:
        procs.run([ESSAYBENCH, "init", "proj"], {"PREFECT_HOME": str(tmp_path / "x")},
                  deadline.left(90), cwd=tmp_path)
        root = tmp_path / "proj"
        write_registry(root / "configs/models.yaml", writer.base_url, judge.base_url)
        (root / "configs/benchmark.yaml").write_text(yaml.safe_dump({
            "per_genre": 2, "generate": {"models": ["writer"]},
            "judge": {"judges": ["judge"]}}), encoding="utf-8")
        spec = yaml.safe_load((root / "prefect.yaml").read_text(encoding="utf-8"))
        pool = spec["deployments"][0]["work_pool"]["name"]

        api = prefect_server
        env = {"PREFECT_API_URL": api, "PREFECT_HOME": str(tmp_path / "prefect-home")}
        doctor = procs.run([ESSAYBENCH, "doctor"], env, deadline.left(90), cwd=root)
        assert f"ok    prefect: {api} answers" in doctor and "0 failed" in doctor
        procs.run([PREFECT, "work-pool", "create", pool, "--type", "process"], env,
                  deadline.left(90))
        procs.run([PREFECT, "--no-prompt", "deploy", "--all"], env, deadline.left(90),
                  cwd=root)
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        procs.spawn("worker", [PREFECT, "worker", "start", "--pool", pool],
                    {**env, "PREFECT_WORKER_QUERY_SECONDS": "1"}, cwd=elsewhere)
        try:
            with prefect_client(api) as client:
                deployment = client.read_deployment_by_name("pipeline/pipeline-weekly")
                assert deployment.pull_steps == [{"essaybench.core.paths.enter_project_home":
                                                  {"directory": str(root)}}]
                week = run_deployment_and_wait(client, deployment.id, deadline.left(400),
                                               lambda: procs.exited("worker"))
                received = writer.stats().totals.received
        except AssertionError as failed:
            raise AssertionError(f"{failed}\n--- worker log:\n{procs.tail('worker')}") from None
    log = f"\n--- worker log:\n{procs.tail('worker')}"
    assert week.state is not None and week.state.is_completed(), f"{week.state}{log}"
    assert received > 0
    assert looks_like_run_id(week.name)
    record = get_run(Store(root / "store"), week.name)  # the project's store
    assert record is not None and record.flow_run_id == str(week.id)
    assert not (elsewhere / "essaybench-store").exists()
    assert sorted(p.name for p in elsewhere.iterdir()) == []
