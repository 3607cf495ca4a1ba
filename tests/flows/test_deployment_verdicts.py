"""A deployment's flow run that ends Failed by design says so cleanly (issue 25, item 4).

The pipeline deployment (prefect.yaml's entrypoint and pull step) is run by Prefect's own
flow-run process, ``python -m prefect.engine FLOW_RUN_ID``, what a worker starts, against
the session's Prefect server; its output is what the worker's log shows:

- a judge changed since its calibration is refused with a message naming the
  deployment's parameter ``uncalibrated_ok``, not the command line's flag (which the CLI,
  and the flow called in-process, still name);
- a run whose judge is down ends Failed "unhealthy";

and neither prints Prefect's "Engine execution exited with unexpected exception"
traceback: the flow run's state message says why it failed, in the engine's one
"Finished in state Failed('…')" line. A bug (any other exception) still prints it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from prefect.client.orchestration import get_client
from prefect.settings import PREFECT_API_URL

from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.drift import DriftParams
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.llm.registry import load_registry
from essaybench.llm.session import open_gateway
from essaybench.runs.calibration import JudgeNotCalibrated
from essaybench.stages.calibrate import calibrate_stage
from essaybench.store import Store
from essaybench.store.runs import record_run
from tests.helpers import closed_port_url
from tests.prefect_server import SPEC, WEEKLY

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_engine")]

DRIFT = {"anchors": 2, "min_anchors": 2, "n_boot": 200}
TRACEBACKS = ("Traceback", "unexpected exception")


def _registry(path: Path, writer: str, judge: str) -> Path:
    entry = {"provider": "fake", "family": "fake", "structured_output": "json_schema",
             "max_concurrency": 4, "timeout_s": 10, "connect_timeout_s": 2, "max_retries": 0}
    path.write_text(yaml.safe_dump({"models": {
        "writer": {**entry, "base_url": writer, "model_id": "writer"},
        "judge": {**entry, "base_url": judge, "model_id": "judge"}}}), encoding="utf-8")
    return path


def _config(path: Path, **judge: Any) -> Path:
    path.write_text(yaml.safe_dump({
        "per_genre": 1, "generate": {"models": ["writer"]},
        "judge": {"judges": ["judge"], **judge}, "drift": DRIFT,
        "alerts": {"n_boot": 200}}), encoding="utf-8")
    return path


def _calibrate(store: Store, server: FakeServerHandle, tmp_path: Path,
               monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge as configured by default, calibrated on the anchors (run "c1")."""
    registry = _registry(tmp_path / "calibrate.yaml", server.base_url, server.base_url)
    monkeypatch.setenv("ESSAYBENCH_MODELS", str(registry))
    config = BenchmarkConfig(per_genre=1, generate=GenerateParams(models=("writer",)),
                             judge=JudgeParams(judges=["judge"]),
                             drift=DriftParams.model_validate(DRIFT))
    record_run(store, "c1", from_stage="calibrate")
    with open_gateway(load_registry(), store.root, ["judge"]) as session:
        calibrate_stage(store, "c1", config, load_registry(), session)


def _deployment_run(store: Store, config: Path, registry: Path,
                    tmp_path: Path) -> tuple[Any, str]:
    """The weekly deployment's flow run (no curation), run by ``python -m prefect.engine``
    as a worker would; its final state and the process's output."""
    parameters = {"benchmark_config": str(config), "store_root": str(store.root),
                  "curate": False}
    return _engine_run("pipeline", f"verdicts-{config.stem}", WEEKLY["entrypoint"],
                       SPEC["pull"], parameters, {"ESSAYBENCH_MODELS": str(registry)}, tmp_path)


def _engine_run(flow_name: str, name: str, entrypoint: str, pull_steps: list[Any] | None,
                parameters: dict[str, Any], env_extra: dict[str, str],
                tmp_path: Path) -> tuple[Any, str]:
    """A deployment's flow run, run by ``python -m prefect.engine`` in ``tmp_path``:
    its final state and the process's output (what a worker's log shows)."""
    with get_client(sync_client=True) as client:
        flow_id = client.create_flow_from_name(flow_name)
        deployment_id = client.create_deployment(
            flow_id=flow_id, name=name, entrypoint=entrypoint, pull_steps=pull_steps,
            parameters=parameters)
        flow_run = client.create_flow_run_from_deployment(deployment_id)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PREFECT_", "ESSAYBENCH_"))}
        env |= {"PREFECT_API_URL": str(PREFECT_API_URL.value()), "DO_NOT_TRACK": "1",
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                "PREFECT_HOME": str(tmp_path / "engine-home"), **env_extra}
        done = subprocess.run([sys.executable, "-m", "prefect.engine", str(flow_run.id)],
                              env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=600, stdin=subprocess.DEVNULL, check=False)
        final = client.read_flow_run(flow_run.id)
    return final.state, done.stdout + done.stderr


def test_a_refusal_names_the_deployment_parameter_and_no_traceback_is_logged(
        curated_copy: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from essaybench.flows.pipeline import pipeline_flow

    store = curated_copy
    with run_fake_server() as server:
        _calibrate(store, server, tmp_path, monkeypatch)
        changed = _config(tmp_path / "changed.yaml", max_tokens=999)
        registry = _registry(tmp_path / "models.yaml", server.base_url, server.base_url)
        calibrated = server.stats().totals.received
        state, output = _deployment_run(store, changed, registry, tmp_path)
        # The same refusal from the flow called in its own process (as the CLI calls it).
        with pytest.raises(JudgeNotCalibrated) as in_process:
            pipeline_flow(str(changed), store_root=str(store.root), curate=False)
        assert server.stats().totals.received == calibrated  # both refused before any call
    assert state is not None and state.is_failed(), (state, output[-3000:])
    message = state.message or ""
    assert "max_tokens=999" in message and "uncalibrated_ok: true" in message, message
    assert "--force-uncalibrated" not in message
    assert output.count("Finished in state Failed(") == 1, output[-3000:]
    assert not [t for t in TRACEBACKS if t in output], output[-3000:]
    assert "--force-uncalibrated" in str(in_process.value)
    assert "uncalibrated_ok" not in str(in_process.value)


def test_an_unhealthy_deployment_run_ends_failed_without_a_traceback(
        curated_copy: Store, tmp_path: Path) -> None:
    with run_fake_server() as writer:
        registry = _registry(tmp_path / "models.yaml", writer.base_url, closed_port_url())
        config = tmp_path / "judge-down.yaml"
        config.write_text(yaml.safe_dump({
            "per_genre": 1, "generate": {"models": ["writer"]}, "judge": {"judges": ["judge"]},
            "drift": None, "alerts": {"n_boot": 200}}), encoding="utf-8")
        state, output = _deployment_run(curated_copy, config, registry, tmp_path)
        assert writer.stats().totals.received > 0
    assert state is not None and state.is_failed(), (state, output[-3000:])
    assert "is unhealthy" in (state.message or ""), state.message
    assert output.count("Finished in state Failed(") == 1, output[-3000:]
    assert not [t for t in TRACEBACKS if t in output], output[-3000:]


BUG_FLOW = """
from prefect import flow

import essaybench.flows.pipeline  # installs the verdict filter, as in a pipeline run


@flow(name="a-bug")
def a_bug() -> None:
    {}["no such key"]
"""


def test_a_bug_in_a_deployment_run_still_logs_its_traceback(tmp_path: Path) -> None:
    """Only verdicts are quiet: an exception nobody meant still shows where it came from."""
    (tmp_path / "bug_flow.py").write_text(BUG_FLOW, encoding="utf-8")
    state, output = _engine_run("a-bug", "a-bug", "bug_flow.py:a_bug", None, {}, {},
                                tmp_path)
    assert state is not None and state.is_failed(), (state, output[-3000:])
    engine = output.index("Engine execution exited with unexpected exception")
    assert "Traceback (most recent call last)" in output[engine:], output[-3000:]
    assert "KeyError: 'no such key'" in output[engine:], output[-3000:]
