"""Transport failures told apart, against real sockets on 127.0.0.1 (issue 12, item 2).

Each failure gets its own ``error_kind`` and a message that says what happened and how
long it took: a refused connection is not a "ConnectTimeout after 300 s" when it failed
in a millisecond. A refused connection (an endpoint restarting) and timeouts are retried;
a name that does not resolve or a failed TLS handshake is a configuration error and is not.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import httpx
import pytest

from essaybench.llm.client import OpenAICompatBackend
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.retry import (
    CONNECT_TIMEOUT,
    CONNECTION_DROPPED,
    CONNECTION_REFUSED,
    DNS,
    READ_TIMEOUT,
    TLS,
    Backoff,
    classify_transport_error,
)
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message
from tests.llm.conftest import fake_spec

FAST = Backoff(base_s=0.01, cap_s=0.02)


def _call(url: str, **spec: Any) -> tuple[ChatResult, float]:
    async def main() -> ChatResult:
        backend = OpenAICompatBackend(fake_spec(**spec), url, backoff=FAST, seed=0)
        try:
            return await backend.complete(ChatRequest(
                model="fake", messages=(Message(role="user", content="写一篇作文"),)))
        finally:
            await backend.aclose()

    started = time.perf_counter()
    result = asyncio.run(main())
    return result, time.perf_counter() - started


def _closed_port() -> int:
    with socket.socket() as sock:  # free a moment ago: nothing listens there now
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A socket that listens but never accepts: the kernel completes the handshake, the
    request goes out, no reply ever comes."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield int(sock.getsockname()[1])


@pytest.fixture
def full_backlog() -> Iterator[int]:
    """A listener whose accept queue is full: the kernel drops new SYNs, so connecting
    never completes (a connect timeout without a network)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(0)
        port = int(sock.getsockname()[1])
        fillers = []
        for _ in range(3):
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
            fillers.append(filler)
        time.sleep(0.05)
        try:
            yield port
        finally:
            for filler in fillers:
                filler.close()


@pytest.fixture
def plain_tcp_server() -> Iterator[int]:
    """Plain HTTP on a port the client dials with https://: its TLS hello gets HTTP back."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    stop = threading.Event()

    def serve() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            with conn:
                try:
                    conn.recv(4096)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(sock.getsockname()[1])
    finally:
        stop.set()
        thread.join(2)
        sock.close()


def test_refused_connection_is_named_timed_and_retried() -> None:
    port = _closed_port()
    result, seconds = _call(f"http://127.0.0.1:{port}/v1", max_retries=2, timeout_s=300)
    assert result.status is CallStatus.API_ERROR and result.error_kind == CONNECTION_REFUSED
    assert result.attempts == 3  # transient: an endpoint that restarts refuses for a moment
    assert result.error is not None
    assert f"connection refused by 127.0.0.1:{port}" in result.error
    assert " ms" in result.error and "300 s" not in result.error
    assert "Timeout" not in result.error and "after 2 retries" in result.error
    assert seconds < 5 and result.latency_s < 1


def test_unresolvable_host_is_dns_and_fails_fast_offline() -> None:
    # .invalid never resolves (RFC 6761): no network needed, and no waiting either.
    result, seconds = _call("http://no-such-host.invalid/v1", max_retries=0, timeout_s=300)
    assert result.status is CallStatus.API_ERROR and result.error_kind == DNS
    assert result.error is not None and result.error.startswith(
        "DNS lookup of no-such-host.invalid failed in ")
    assert "Timeout" not in result.error
    assert seconds < 5


def test_name_not_found_is_not_retried() -> None:
    result, _ = _call("http://no-such-host.invalid/v1", max_retries=3)
    temporary = False  # what the resolver says (offline, too) decides whether to retry
    try:
        socket.getaddrinfo("no-such-host.invalid", 80)
    except socket.gaierror as exc:
        temporary = exc.errno == socket.EAI_AGAIN
    assert result.error_kind == DNS
    assert result.attempts == (4 if temporary else 1)


def test_listener_that_never_answers_is_a_read_timeout(silent_listener: int) -> None:
    result, seconds = _call(f"http://127.0.0.1:{silent_listener}/v1", max_retries=1,
                            timeout_s=0.3, connect_timeout_s=2)
    assert result.status is CallStatus.API_ERROR and result.error_kind == READ_TIMEOUT
    assert result.attempts == 2  # retried
    assert result.error is not None
    assert result.error.startswith(f"no reply from 127.0.0.1:{silent_listener} within the "
                                   "0.3 s read timeout (gave up after ")
    assert 0.25 < result.latency_s < 2 and seconds < 5


def test_connection_that_never_completes_is_a_connect_timeout(full_backlog: int) -> None:
    result, seconds = _call(f"http://127.0.0.1:{full_backlog}/v1", max_retries=0,
                            timeout_s=30, connect_timeout_s=0.3)
    assert result.status is CallStatus.API_ERROR and result.error_kind == CONNECT_TIMEOUT
    assert result.error is not None
    assert result.error.startswith(f"no connection to 127.0.0.1:{full_backlog} within the "
                                   "0.3 s connect timeout")
    assert "30 s" not in result.error and seconds < 5


def test_tls_to_a_plain_tcp_port_is_a_tls_error_not_retried(plain_tcp_server: int) -> None:
    result, seconds = _call(f"https://127.0.0.1:{plain_tcp_server}/v1", max_retries=3)
    assert result.status is CallStatus.API_ERROR and result.error_kind == TLS
    assert result.attempts == 1  # a configuration error: retrying cannot fix it
    assert result.error is not None
    assert result.error.startswith(f"TLS handshake with 127.0.0.1:{plain_tcp_server} failed in ")
    assert "WRONG_VERSION_NUMBER" in result.error and "http://" in result.error
    assert seconds < 5


@pytest.mark.parametrize("how", ["reset", "close"])
def test_dropped_connection_is_named(how: str) -> None:
    with run_fake_server(FakeScenario.model_validate(
            {"faults": [{"kind": "drop", "how": how}]})) as server:
        result, _ = _call(server.base_url, max_retries=1)
    assert result.status is CallStatus.API_ERROR and result.error_kind == CONNECTION_DROPPED
    assert result.attempts == 2 and result.error is not None and "dropped after" in result.error


def _aiohttp_mapped(inner: BaseException) -> httpx.ConnectTimeout:
    """What httpx-aiohttp raises: every connection error becomes a ConnectTimeout."""
    try:
        try:
            raise inner
        except BaseException as exc:
            raise httpx.ConnectTimeout(str(exc)) from exc
    except httpx.ConnectTimeout as mapped:
        return mapped


@pytest.mark.parametrize("inner,kind,transient", [
    (ConnectionRefusedError(errno.ECONNREFUSED, "refused"), CONNECTION_REFUSED, True),
    (socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution"), DNS, True),
    (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), DNS, False),
    (ssl.SSLCertVerificationError(1, "certificate verify failed"), TLS, False),
    (ssl.SSLEOFError(8, "EOF occurred in violation of protocol"), TLS, True),
    (aiohttp.ConnectionTimeoutError("Connection timeout"), CONNECT_TIMEOUT, True),
    (aiohttp.SocketTimeoutError("Timeout on reading"), READ_TIMEOUT, True),
    (aiohttp.ServerDisconnectedError(), CONNECTION_DROPPED, True),
    (ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), CONNECTION_DROPPED,
     True),
])
def test_classification_looks_behind_the_mapped_exception(
        inner: BaseException, kind: str, transient: bool) -> None:
    failure = classify_transport_error(_aiohttp_mapped(inner), 0.002, "api.example:443",
                                       connect_timeout_s=10, read_timeout_s=300)
    assert (failure.kind, failure.transient) == (kind, transient)
    assert "ConnectTimeout" not in failure.message
