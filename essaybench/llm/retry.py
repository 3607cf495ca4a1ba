"""Which failures are transient, and how long to wait before trying again.

This is the only place the gateway decides to retry. Transient: 429, 500, 502,
503, 504, timeouts, refused and dropped connections, a temporary DNS failure and a
garbled 200 body (a proxy cut it). Everything else fails fast with a classified
``error_kind``.

Transport failures are told apart by what actually happened (``classify_transport_error``),
not by the httpx exception type: httpx-aiohttp maps every aiohttp connection error,
a refused connection included, to ``httpx.ConnectTimeout``.
"""

from __future__ import annotations

import errno
import random
import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import aiohttp
import httpx

TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
CONTEXT_LENGTH_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})
CONTEXT_LENGTH_PHRASES = ("context length", "maximum context", "context_length", "too many tokens",
                          "exceeds the context", "prompt is too long")
CONTENT_FILTER_CODES = frozenset({"content_filter", "content_policy_violation",
                                  "data_inspection_failed", "sensitive_content"})


@dataclass(frozen=True)
class Backoff:
    base_s: float = 0.5
    cap_s: float = 30.0
    max_retry_after_s: float = 120.0

    def delay(self, retry: int, rng: random.Random, retry_after_s: float | None = None) -> float:
        """Seconds before retry number ``retry`` (0-based): Retry-After, else full jitter."""
        if retry_after_s is not None:
            # A little jitter on top so a crowd told "wait 2 s" does not return as one.
            return min(retry_after_s, self.max_retry_after_s) + rng.uniform(0, self.base_s / 2)
        return rng.uniform(0, min(self.cap_s, self.base_s * (2 ** retry)))


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date; None if absent or unreadable."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def classify_http_error(status: int, code: str | None, message: str) -> tuple[bool, str]:
    """(transient?, error_kind) for a non-200 response."""
    lowered = message.lower()
    if status in TRANSIENT_STATUS:
        return True, f"http_{status}"
    if (code in CONTEXT_LENGTH_CODES) or any(p in lowered for p in CONTEXT_LENGTH_PHRASES):
        return False, "context_length"
    if code in CONTENT_FILTER_CODES or "content filter" in lowered or "content_filter" in lowered:
        return False, "content_filter"
    return False, f"http_{status}"


# error_kind of each transport failure (the ledger, the snapshots and run health read them).
CONNECTION_REFUSED = "connection_refused"
DNS = "dns"
TLS = "tls"
CONNECT_TIMEOUT = "connect_timeout"
READ_TIMEOUT = "read_timeout"
TIMEOUT = "timeout"  # a write or pool timeout, or one nothing more is known about
CONNECTION_DROPPED = "connection_dropped"
CONNECT = "connect"  # any other transport failure (e.g. network unreachable)
TRANSPORT_KINDS = frozenset({CONNECTION_REFUSED, DNS, TLS, CONNECT_TIMEOUT, READ_TIMEOUT,
                             TIMEOUT, CONNECTION_DROPPED, CONNECT})


@dataclass(frozen=True)
class TransportFailure:
    """What a failed HTTP exchange was, for the record: retry or not, kind, message."""

    transient: bool
    kind: str
    message: str


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception behind it (causes, contexts, aiohttp's ``os_error``)."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for nxt in (current.__cause__, current.__context__,
                    getattr(current, "os_error", None)):
            if isinstance(nxt, BaseException):
                todo.append(nxt)


def _first(exc: BaseException, *types: type[BaseException]) -> BaseException | None:
    return next((e for e in _chain(exc) if isinstance(e, types)), None)


def took(seconds: float) -> str:
    """A duration as a person reads it: "1 ms", "250 ms", "3.2 s"."""
    return f"{max(seconds, 0.0) * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return str(exc.strerror)
    return str(exc) or type(exc).__name__


def classify_transport_error(exc: BaseException, elapsed_s: float, where: str, *,
                             connect_timeout_s: float, read_timeout_s: float
                             ) -> TransportFailure:
    """What went wrong between us and ``where`` (host:port), in ``elapsed_s`` seconds.

    A refused connection is transient (an endpoint restarting refuses for a moment) and
    so are timeouts, dropped connections and a temporary DNS failure; a name that does
    not resolve, or a TLS handshake that fails (a certificate, or a port speaking plain
    HTTP), stays wrong until someone fixes the configuration: no retry."""
    spent = took(elapsed_s)
    dns = _first(exc, aiohttp.ClientConnectorDNSError, socket.gaierror)
    if dns is not None:
        gai = _first(exc, socket.gaierror)
        temporary = isinstance(gai, socket.gaierror) and gai.errno == socket.EAI_AGAIN
        host = where.rsplit(":", 1)[0]
        return TransportFailure(temporary, DNS, f"DNS lookup of {host} failed in {spent}: "
                                                f"{_reason(gai or dns)}")
    tls = _first(exc, ssl.SSLError, ssl.CertificateError, aiohttp.ClientSSLError)
    if tls is not None:
        # The ssl module's own error, not aiohttp's wrapper of it (which repeats the host).
        inner = next((e for e in _chain(exc) if isinstance(e, ssl.SSLError | ssl.CertificateError)
                      and not isinstance(e, aiohttp.ClientError)), tls)
        reason = str(inner)
        hint = (" (the port speaks plain HTTP? then the URL needs http://)"
                if "WRONG_VERSION_NUMBER" in str(inner) else "")
        return TransportFailure(isinstance(inner, ssl.SSLEOFError), TLS,
                                f"TLS handshake with {where} failed in {spent}: "
                                f"{reason}{hint}")
    refused = _first(exc, ConnectionRefusedError)
    if refused is not None or any(isinstance(e, OSError) and e.errno == errno.ECONNREFUSED
                                  for e in _chain(exc)):
        return TransportFailure(True, CONNECTION_REFUSED,
                                f"connection refused by {where} in {spent} (nothing "
                                "listening: the endpoint is down or restarting)")
    if _first(exc, aiohttp.ConnectionTimeoutError) is not None or (
            isinstance(exc, httpx.ConnectTimeout) and exc.__cause__ is None):
        return TransportFailure(True, CONNECT_TIMEOUT,
                                f"no connection to {where} within the {connect_timeout_s:g} s "
                                f"connect timeout (gave up after {spent})")
    if _first(exc, aiohttp.SocketTimeoutError) is not None or (
            isinstance(exc, httpx.ReadTimeout) and exc.__cause__ is None):
        return TransportFailure(True, READ_TIMEOUT,
                                f"no reply from {where} within the {read_timeout_s:g} s read "
                                f"timeout (gave up after {spent})")
    dropped = _first(exc, aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError,
                     ConnectionResetError, ConnectionAbortedError, BrokenPipeError)
    if dropped is not None:
        return TransportFailure(True, CONNECTION_DROPPED,
                                f"connection to {where} dropped after {spent}: "
                                f"{_reason(dropped)}")
    if _first(exc, TimeoutError, httpx.TimeoutException) is not None:
        return TransportFailure(True, TIMEOUT, f"{type(exc).__name__} talking to {where} "
                                               f"after {spent}")
    inner = next((e for e in _chain(exc) if isinstance(e, OSError)), exc)
    return TransportFailure(True, CONNECT, f"connection to {where} failed in {spent}: "
                                           f"{_reason(inner)}")
