"""Real Prefect processes for end-to-end tests: ``prefect server start`` on a free loopback
port, one-shot CLI commands and a ``prefect worker start`` against it, all stopped at the end.

Every process started here runs in a session of its own and carries a per-test tag in its
environment, which children inherit: the flow-run processes a worker spawns (in sessions
of their own, outside the worker's process group) are found by that tag, so the sweep at
the end stops exactly what the test started — by pid, nothing else — and can prove it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import httpx
import psutil  # type: ignore[import-untyped]
import yaml
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.objects import FlowRun
from prefect.settings import PREFECT_API_URL, temporary_settings

from essaybench.core.paths import PROJECT_ROOT
from ops.local_stack import free_port

PREFECT = str(Path(sys.executable).with_name("prefect"))  # the CLI of this virtualenv
TAG_ENV = "ESSAYBENCH_TEST_PROCESS_TAG"
# What a user's shell would not have: the test session's own Prefect home and settings,
# and essaybench paths, which each test gives its processes explicitly.
_DROPPED_PREFIXES = ("PREFECT_", "ESSAYBENCH_")
_QUIET = {"DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
# The project's deployments (prefect.yaml), the weekly one and the pool it runs on.
SPEC: dict[str, Any] = yaml.safe_load((PROJECT_ROOT / "prefect.yaml").read_text("utf-8"))
WEEKLY: dict[str, Any] = next(d for d in SPEC["deployments"] if d["name"] == "pipeline-weekly")
POOL: str = WEEKLY["work_pool"]["name"]


def wait_until(ready: Callable[[], bool], timeout: float, what: str,
               alive: Callable[[], str | None] = lambda: None, poll: float = 0.25) -> None:
    """Poll ``ready`` until it holds; AssertionError after ``timeout`` seconds, or as soon
    as ``alive`` returns a reason (e.g. the process that should get ready died)."""
    deadline = time.monotonic() + timeout
    while not ready():
        if (dead := alive()) is not None:
            raise AssertionError(f"{what}: {dead}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(poll)


class Deadline:
    """One time budget for a whole test: each wait gets its own cap or what is left."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self, cap: float) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            raise AssertionError(f"over the test's budget of {self.seconds:g} s")
        return min(cap, left)


class Processes:
    """The processes one test starts, stopped together on exit (even on failure)."""

    def __init__(self, logs: Path) -> None:
        self.tag = uuid4().hex
        self.logs = logs
        self.started: dict[str, subprocess.Popen[bytes]] = {}
        logs.mkdir(parents=True, exist_ok=True)

    def env(self, extra: Mapping[str, str]) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith(_DROPPED_PREFIXES)}
        return {**base, **_QUIET, **extra, TAG_ENV: self.tag}

    def spawn(self, name: str, args: Sequence[str], env: Mapping[str, str],
              cwd: Path = PROJECT_ROOT) -> None:
        """Start a long-running process, its output to ``logs/<name>.log``."""
        with (self.logs / f"{name}.log").open("wb") as log:
            self.started[name] = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self.env(env), cwd=cwd, start_new_session=True)

    def run(self, args: Sequence[str], env: Mapping[str, str], timeout: float,
            cwd: Path = PROJECT_ROOT) -> str:
        """Run a CLI command to completion from ``cwd`` (the repository root); its output,
        or an AssertionError with it."""
        done = subprocess.run(args, capture_output=True, text=True, env=self.env(env),
                              cwd=cwd, timeout=timeout, start_new_session=True,
                              stdin=subprocess.DEVNULL, check=False)
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"{' '.join(args[1:])} exited {done.returncode}:\n{output}"
        return output

    def exited(self, name: str) -> str | None:
        code = self.started[name].poll()
        return None if code is None else f"{name} exited with {code}:\n{self.tail(name)}"

    def tail(self, name: str, chars: int = 4000) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")[-chars:]

    def running(self) -> list[psutil.Process]:
        """Live processes this test started: its own and every process carrying its tag."""
        found: dict[int, psutil.Process] = {}
        candidates = [*psutil.process_iter()]
        for popen in self.started.values():
            with suppress(psutil.Error):
                candidates += psutil.Process(popen.pid).children(recursive=True)
        for proc in candidates:
            with suppress(psutil.Error):
                ours = any(proc.pid == p.pid and p.poll() is None for p in self.started.values())
                if (ours or proc.environ().get(TAG_ENV) == self.tag) and (
                        proc.status() != psutil.STATUS_ZOMBIE):
                    found[proc.pid] = proc
        return list(found.values())

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM every process group started here and every tagged process, SIGKILL what
        is left after ``grace`` seconds, and reap the direct children."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            procs = self.running()
            for popen in self.started.values():
                if popen.poll() is None:  # not reaped, so its pid (= its group id) is still its
                    with suppress(ProcessLookupError, PermissionError):
                        os.killpg(popen.pid, sig)
            for proc in procs:
                with suppress(psutil.Error):
                    proc.send_signal(sig)
            psutil.wait_procs(procs, timeout=grace if sig == signal.SIGTERM else 5.0)
        for popen in self.started.values():
            with suppress(subprocess.TimeoutExpired):
                popen.wait(timeout=5)

    def __enter__(self) -> Processes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_server(procs: Processes, home: Path, timeout: float = 120.0) -> str:
    """``prefect server start`` on a free 127.0.0.1 port with its own PREFECT_HOME (SQLite
    database there; no UI); its API URL once /api/health answers."""
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    procs.spawn("server", [PREFECT, "server", "start", "--host", "127.0.0.1", "--port",
                           str(port)],
                {"PREFECT_HOME": str(home), "PREFECT_SERVER_UI_ENABLED": "false"})

    def healthy() -> bool:
        try:
            return httpx.get(f"{api}/health", timeout=2, trust_env=False).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(healthy, timeout, "prefect server health", lambda: procs.exited("server"))
    return api


def clear_server(api: str) -> None:
    """Leave the server at ``api`` as a fresh one for the next test sharing it: no flow run,
    deployment or work pool (each test's own, schedules included: a deployment's interval
    schedule would otherwise keep making runs a later test's worker picks up)."""
    with prefect_client(api) as client:
        for deployment in client.read_deployments():
            client.delete_deployment(deployment.id)
        while runs := client.read_flow_runs(limit=200):
            for run in runs:
                client.delete_flow_run(run.id)
        for pool in client.read_work_pools():
            if pool.name != "default-agent-pool":
                client.delete_work_pool(pool.name)


@contextmanager
def prefect_client(api: str) -> Iterator[SyncPrefectClient]:
    """A Prefect client of this process talking to the server at ``api``."""
    with temporary_settings(updates={PREFECT_API_URL: api}), \
            get_client(sync_client=True) as client:
        yield client


def write_registry(path: Path, writer_url: str, judge_url: str) -> None:
    """A worker's $ESSAYBENCH_MODELS: a ``writer`` and a ``judge`` served by fake servers
    (each flow run reads it when it starts)."""
    common = {"provider": "fake", "family": "fake", "structured_output": "json_schema",
              "max_concurrency": 4, "timeout_s": 10, "connect_timeout_s": 2,
              "max_retries": 0}
    path.write_text(yaml.safe_dump({"models": {
        "writer": {**common, "base_url": writer_url, "model_id": "writer"},
        "judge": {**common, "base_url": judge_url, "model_id": "judge"}}}), encoding="utf-8")


def run_deployment_and_wait(client: SyncPrefectClient, deployment_id: UUID, timeout: float,
                            alive: Callable[[], str | None], **parameters: Any) -> FlowRun:
    """Trigger a deployment as ``prefect deployment run`` does (its own parameters, with
    ``parameters`` over them) and wait until a worker has brought the flow run to a final
    state; ``alive`` gives a reason to stop waiting (the worker died)."""
    flow_run_id = client.create_flow_run_from_deployment(deployment_id,
                                                         parameters=parameters).id
    final: list[FlowRun] = []

    def done() -> bool:
        run = client.read_flow_run(flow_run_id)
        if run.state is not None and run.state.is_final():
            final.append(run)
        return bool(final)

    wait_until(done, timeout, f"flow run {flow_run_id}", alive, poll=0.5)
    return final[0]
