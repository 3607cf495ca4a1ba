"""``kill -9`` of ``essaybench run`` leaves no Prefect server behind (issue 25, item 3).

With no PREFECT_API_URL, Prefect starts a temporary API server (uvicorn serving
prefect.server.api.server) as a child of the command; SIGKILL runs none of the command's
exit handlers, and that server used to be reparented to init and keep running. Here a
real ``essaybench run`` on the fake server (slow replies, so it is mid-run) is killed
with SIGKILL, and every process it had started must be gone within seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

import psutil  # type: ignore[import-untyped]
import pytest
import yaml

from essaybench.cli.temp_server import GRACE_S, SERVER_MODULE, WATCH_INTERVAL_S
from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.store import Store
from tests.prefect_server import wait_until

pytestmark = pytest.mark.slow

SLOW = FakeScenario.model_validate({"models": {"*": {"latency_ms": 3000}}})


def _config(tmp_path: Path, server: FakeServerHandle) -> tuple[Path, Path]:
    entry = {"provider": "fake", "base_url": server.base_url, "family": "fake",
             "structured_output": "json_schema", "max_concurrency": 1, "timeout_s": 30}
    models = tmp_path / "models.yaml"
    models.write_text(yaml.safe_dump({"models": {"writer": {**entry, "model_id": "writer"},
                                                 "judge": {**entry, "model_id": "judge"}}}),
                      encoding="utf-8")
    config = tmp_path / "benchmark.yaml"
    config.write_text(yaml.safe_dump({
        "per_genre": 4, "generate": {"models": ["writer"]}, "judge": {"judges": ["judge"]},
        "drift": None}), encoding="utf-8")
    return models, config


def _servers(proc: psutil.Process) -> list[psutil.Process]:
    found = []
    for child in proc.children(recursive=True):
        with suppress(psutil.Error):
            if any(SERVER_MODULE in part for part in child.cmdline()):
                found.append(child)
    return found


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for p in procs:
        with suppress(psutil.Error):
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
    return alive


def test_kill_9_of_a_run_takes_its_temporary_prefect_server_down(
        curated_copy: Store, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ESSAYBENCH_"))}
    with run_fake_server(SLOW) as server:
        models, config = _config(tmp_path, server)
        env |= {"PREFECT_HOME": str(tmp_path / "prefect"), "DO_NOT_TRACK": "1",
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "ESSAYBENCH_MODELS": str(models)}
        log = (tmp_path / "run.log").open("wb")
        cli = subprocess.Popen(
            [sys.executable, "-m", "essaybench.cli", "run", "--config", str(config),
             "--store", str(curated_copy.root), "--no-curate"],
            cwd=PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        command = psutil.Process(cli.pid)
        started: list[psutil.Process] = []
        try:
            def exited() -> str | None:
                code = cli.poll()
                return None if code is None else f"exited {code}: " + (
                    tmp_path / "run.log").read_text(errors="replace")[-3000:]

            # Mid-run: its temporary server is up and the writer has been asked.
            wait_until(lambda: bool(_servers(command)) and server.stats().totals.received > 0,
                       180, "the run's first call", exited)
            started = [command, *command.children(recursive=True)]
            assert _servers(command)
            cli.send_signal(signal.SIGKILL)
            cli.wait(10)
            # The server notices within a watch interval and stops in order.
            deadline = time.monotonic() + WATCH_INTERVAL_S + GRACE_S + 5
            while _alive(started) and time.monotonic() < deadline:
                time.sleep(0.2)
            left = [(p.pid, " ".join(p.cmdline())[:160]) for p in _alive(started)]
            assert left == [], f"still running after the command was killed: {left}"
        finally:
            for p in _alive(started):  # what this test started, by pid
                with suppress(psutil.Error):
                    p.kill()
            if cli.poll() is None:
                cli.kill()
                cli.wait(10)
            log.close()
