"""A fake OpenAI-compatible server speaking real HTTP on 127.0.0.1, for tests, demos, benchmarks.

In-process (tests)::

    with run_fake_server(FakeScenario(...)) as fake:
        httpx.post(f"{fake.base_url}/chat/completions", json=...)
        assert fake.stats().totals.completed == 1

As a subprocess (benchmarks, demos)::

    python -m essaybench.llm.fake --scenario scenario.yaml --port 0
    # prints "LISTENING http://127.0.0.1:PORT/v1" once it accepts connections;
    # stops on SIGTERM or SIGINT

or ``with spawn_fake_server("scenario.yaml") as fake: ...``. The scenario format is in
:mod:`.scenario`; endpoints, faults and counters are in :mod:`.app`, the wire format in
:mod:`.protocol`, structured replies in :mod:`.schema`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from pydantic import BaseModel, ConfigDict
from uvicorn._types import ASGIReceiveCallable, ASGISendCallable, Scope
from uvicorn.protocols.http.h11_impl import H11Protocol

from essaybench.llm.fake.app import TRANSPORT_SCOPE_KEY, FakeState, build_app
from essaybench.llm.fake.batch_anthropic import AnthropicBatches
from essaybench.llm.fake.batch_openai import OpenAIBatches
from essaybench.llm.fake.batch_store import BatchCounts
from essaybench.llm.fake.scenario import FakeScenario

_KEY_ENV = "ESSAYBENCH_FAKE_SERVER_KEY"  # how spawn_fake_server hands a key to the child
# Plain HTTP to loopback: no proxies from the environment, and no TLS context (building the
# default one costs ~50 ms per call).
_LOOPBACK: dict[str, Any] = {"timeout": 10, "trust_env": False, "verify": False}


class ModelCounts(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    received: int
    completed: int
    replayed: int = 0  # answered from the Idempotency-Key record, uncharged


class FakeTotals(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    received: int  # chat requests that reached a model (sum over keys)
    completed: int  # 200s with finish_reason "stop", no fault, fully sent
    replayed: int = 0  # answered from the Idempotency-Key record: not received, not charged
    rejected: int  # 400/401/404 before reaching a model (bad JSON, auth, unknown model)
    distinct_keys: int
    by_status: dict[str, int]  # HTTP status of every chat response sent
    faults: dict[str, int]  # fault rules fired, by kind
    # User + system CPU seconds of the process serving the fake since it started (not zeroed by
    # a reset): take differences. In-process (run_fake_server) that process is the caller's
    # own, so it counts the client and everything else the process does too.
    cpu_s: float
    # With a capacity (scenario.capacity): the most chat requests served at once, and the
    # most waiting for a slot, since the start or the last reset (0 without one).
    in_service_peak: int = 0
    queued_peak: int = 0


class FakeStats(BaseModel):
    """GET /_fake/stats. Keys are sha256 of the canonical JSON request body."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    totals: FakeTotals
    per_model: dict[str, ModelCounts]
    completed_per_key: dict[str, int]  # {"0": keys never completed, "1": once, "2": twice...}
    received_per_key: dict[str, int]  # {"1": keys sent once, "2": twice...}
    per_key: dict[str, ModelCounts] | None = None  # only with ?per_key=1
    # Arrivals by Idempotency-Key header, whether the scenario honours it or not; only with
    # ?per_key=1. The header names a run's call (client.idempotency_token), so a ledger row
    # can be matched to the requests that carried it.
    per_token: dict[str, int] | None = None
    # Batch API traffic (fake/batch_store.py), apart from the direct calls counted above.
    batch: BatchCounts | None = None


@dataclass(frozen=True)
class FakeServerHandle:
    """A running fake server, in-process or in a subprocess."""

    base_url: str  # "http://127.0.0.1:PORT/v1"

    @property
    def root_url(self) -> str:
        return self.base_url.removesuffix("/v1")

    def stats(self, per_key: bool = False) -> FakeStats:
        url = f"{self.root_url}/_fake/stats" + ("?per_key=1" if per_key else "")
        response = httpx.get(url, **_LOOPBACK)
        response.raise_for_status()
        return FakeStats.model_validate(response.json())

    def reset(self) -> None:
        httpx.post(f"{self.root_url}/_fake/reset", **_LOOPBACK).raise_for_status()


class _TransportH11(H11Protocol):
    """uvicorn's h11 protocol, handing each connection's transport to the app (for drop/hang)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        inner = self.app

        async def app(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
            scope[TRANSPORT_SCOPE_KEY] = transport  # type: ignore[literal-required]
            await inner(scope, receive, send)

        self.app = app


class _HeadWithBody(asyncio.Transport):
    """One response's view of its connection: the head is held back and sent with the body.

    uvicorn writes a response's status line and headers, then its body, as two writes; on an
    idle connection each is its own send() and loopback segment waking the client, and the
    two sends were ~30% of the fake's CPU per request. The bytes on the wire are the same.
    """

    def __init__(self, transport: asyncio.Transport) -> None:
        super().__init__()
        self._transport = transport
        self._started = False
        self._head: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._started:  # uvicorn's first write of a response is its head
            self._started = True
            self._head = bytes(data)
            return
        if self._head is not None:
            data, self._head = self._head + data, None
        self._transport.write(data)

    def _flush(self) -> None:
        if self._head is not None:
            self._transport.write(self._head)
            self._head = None

    def close(self) -> None:
        self._flush()  # a head with no body (the app failed after starting) still goes out
        self._transport.close()

    def abort(self) -> None:
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)


_Protocol: type[asyncio.Protocol] = _TransportH11
with contextlib.suppress(ImportError):  # httptools is a dependency; h11 is only the fallback
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class _TransportHttpTools(HttpToolsProtocol):
        """uvicorn's httptools protocol, with the connection's transport in every scope.

        httptools parses in C: h11's pure-Python parsing and serialising was about a quarter
        of the fake's CPU per request, CPU a benchmark's client on the same cores then lacks.
        """

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self.scope[TRANSPORT_SCOPE_KEY] = self.transport  # type: ignore[literal-required]

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            # Not for HEAD (no body write follows the head) nor for "Expect: 100-continue"
            # (the interim response must go out before the client sends its body). These
            # are uvicorn internals (uvicorn is not pinned): read defensively, so a change
            # there costs the saving, never a response.
            cycle = getattr(self, "cycle", None)
            if (cycle is not None and getattr(cycle, "scope", None) is self.scope
                    and hasattr(cycle, "transport") and self.scope["method"] != "HEAD"
                    and getattr(self, "expect_100_continue", True) is False):
                cycle.transport = _HeadWithBody(self.transport)

    _Protocol = _TransportHttpTools


class _Server(uvicorn.Server):
    """uvicorn without its signal capture (we own it), with a started callback."""

    def __init__(self, config: uvicorn.Config, state: FakeState,
                 on_started: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self.state, self.on_started = state, on_started

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.on_started is not None:
            self.on_started()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.state.stopping = True  # ends hang faults now instead of after their seconds
        await super().shutdown(sockets)


def _make_server(scenario: FakeScenario, *, quiet_logging: bool,
                 on_started: Callable[[], None] | None = None) -> _Server:
    state = FakeState(scenario)
    config = uvicorn.Config(
        build_app(state, (*OpenAIBatches(state).routes(), *AnthropicBatches(state).routes())),
        http=_Protocol, ws="none", lifespan="off", proxy_headers=False,
        loop="asyncio",  # the drop/hang faults need asyncio transports (uvloop has its own)
        log_level="warning", access_log=False, timeout_graceful_shutdown=3,
        # Long enough that a busy client's pooled connection is not closed under it (uvicorn's
        # 5 s default races with reuse and shows up as spurious ReadErrors).
        timeout_keep_alive=30,
        # In-process: leave the host's logging configuration alone.
        log_config=None if quiet_logging else uvicorn.config.LOGGING_CONFIG)
    return _Server(config, state, on_started)


def _bind(host: str, port: int) -> socket.socket:
    # proto must say TCP: asyncio sets TCP_NODELAY only on sockets whose proto is IPPROTO_TCP,
    # and without it Nagle + delayed ACK add ~40 ms to every response.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


def _as_scenario(scenario: FakeScenario | str | Path | None) -> FakeScenario:
    if scenario is None:
        return FakeScenario()
    if isinstance(scenario, FakeScenario):
        return scenario
    return FakeScenario.from_file(scenario)


@contextlib.contextmanager
def run_fake_server(scenario: FakeScenario | str | Path | None = None, *,
                    host: str = "127.0.0.1",
                    startup_timeout: float = 10.0) -> Iterator[FakeServerHandle]:
    """Serve ``scenario`` from a background thread on a port the OS picks."""
    sock = _bind(host, 0)
    port = sock.getsockname()[1]
    server = _make_server(_as_scenario(scenario), quiet_logging=True)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]},
                              name=f"fake-openai-{port}", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + startup_timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"fake server on port {port} did not start")
            time.sleep(0.005)
        yield FakeServerHandle(f"http://{host}:{port}/v1")
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


@contextlib.contextmanager
def spawn_fake_server(scenario: FakeScenario | str | Path | None = None, *,
                      startup_timeout: float = 30.0,
                      env: Mapping[str, str] | None = None,
                      host: str = "127.0.0.1",
                      prefix: Sequence[str] = ()) -> Iterator[FakeServerHandle]:
    """Run ``python -m essaybench.llm.fake`` in a subprocess listening on ``host``;
    terminate it on exit. ``prefix``: a command that execs the rest (the same pid), e.g.
    ``ip netns exec NAME`` to serve from a network namespace (``ops.netns``)."""
    with tempfile.TemporaryDirectory(prefix="fake-openai-") as tmp:
        child_env = {**os.environ, **(env or {})}
        cmd = [*prefix, sys.executable, "-m", "essaybench.llm.fake", "--host", host,
               "--port", "0"]
        if isinstance(scenario, FakeScenario):
            data = scenario.model_dump(mode="json", exclude={"api_key"})
            if scenario.api_key is not None:  # through the environment, never onto disk
                data["api_key_env"] = _KEY_ENV
                child_env[_KEY_ENV] = scenario.api_key.get_secret_value()
            scenario = Path(tmp) / "scenario.json"
            scenario.write_text(json.dumps(data), encoding="utf-8")
        if scenario is not None:
            cmd += ["--scenario", str(scenario)]
        stderr_path = Path(tmp) / "stderr.log"
        with stderr_path.open("wb") as stderr:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, env=child_env,
                                    text=True)
        assert proc.stdout is not None
        try:
            yield FakeServerHandle(_await_listening(proc, startup_timeout, stderr_path))
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.stdout.close()


def _await_listening(proc: subprocess.Popen[str], timeout: float, stderr_path: Path) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while (remaining := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([proc.stdout], [], [], remaining)
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:  # EOF: the child died
            proc.wait()
            raise RuntimeError(f"fake server exited with {proc.returncode}: "
                               f"{stderr_path.read_text(errors='replace')[-2000:]}")
        if line.startswith("LISTENING "):
            return line.split(maxsplit=1)[1].strip()
    raise RuntimeError(f"fake server printed no LISTENING line within {timeout:g} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m essaybench.llm.fake",
                                     description="Fake OpenAI-compatible chat server.")
    parser.add_argument("--scenario", type=Path, help="Scenario YAML or JSON (default: echo).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: let the OS pick.")
    args = parser.parse_args(argv)
    sock = _bind(args.host, args.port)
    base_url = f"http://{args.host}:{sock.getsockname()[1]}/v1"
    server = _make_server(_as_scenario(args.scenario), quiet_logging=False,
                          on_started=lambda: print(f"LISTENING {base_url}", flush=True))

    def stop(signum: int, frame: Any) -> None:
        # A second Ctrl-C skips the graceful wait.
        server.force_exit = server.should_exit and signum == signal.SIGINT
        server.should_exit = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
