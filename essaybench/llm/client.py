"""The backend for OpenAI-compatible endpoints (protocol ``openai``).

``ChatBackend.complete`` (the interface: ``llm.backends``) turns one ``ChatRequest`` into
one ``ChatResult`` and never raises for anything the provider does: every outcome is a
status. Retries of
transient failures (see ``retry``) and re-asks of invalid structured replies happen
here, inside one logical call, so the ledger records the call once with its count
of attempts (and, apart, how many were transport retries and how many re-asks).
"""

from __future__ import annotations

import asyncio
import json
import random
import ssl
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import httpx

from essaybench.core.hashing import sha256_hex
from essaybench.llm.backends import ChatBackend, register_backend
from essaybench.llm.ratelimit import EndpointLimiter, Limiter
from essaybench.llm.registry import ModelSpec
from essaybench.llm.replicas import ReplicaPool, affinity_of
from essaybench.llm.reply import read_reply
from essaybench.llm.retry import (
    CONNECTION_REFUSED,
    Backoff,
    classify_http_error,
    classify_transport_error,
    parse_retry_after,
)
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message, Usage, key_of
from essaybench.llm.usage import openai_usage

__all__ = ["ChatBackend", "OpenAICompatBackend", "canonical_request", "estimate_tokens",
           "idempotency_header", "idempotency_token", "request_key", "token_of_header"]

ERROR_TEXT_LIMIT = 500
# Transport: aiohttp's session (it was httpx's request and response types over aiohttp's
# pool, httpx-aiohttp, the transport the OpenAI SDK offers as its aiohttp option). httpcore's
# own pool checks every connection on each request (a syscall each, via anyio): ~19 ms CPU
# per call with one pool of 64, ~2.0 ms with many pools of 2; over aiohttp's C-accelerated
# pool and parser ~1.4 ms for the whole call, and ~1.24 ms when the request goes to the
# transport directly rather than through ``httpx.AsyncClient``, whose per-request cookie
# jar, URL and header merging, auth and redirect handling this client never uses
# (benchmarks/llm_gateway.py). Now the request goes to aiohttp's session itself: the
# transport's httpx Request and Response around it (URL parsed twice, header objects,
# a response stream) were a fifth of a call's client CPU; the session is made as the
# transport made it, with the same timeouts, and errors are classified from aiohttp's
# own exceptions, which the transport's httpx errors carried as their causes. The body is
# encoded once per attempt (ModelSpec.request_json).


def canonical_request(spec: ModelSpec, request: ChatRequest) -> str:
    """The canonical JSON of ``request`` as ``spec``'s endpoint would see it."""
    return request.canonical(spec.base_url, spec.model_id, spec.effective_params(request.params))


def request_key(spec: ModelSpec, request: ChatRequest) -> str:
    return key_of(canonical_request(spec, request))


IDEMPOTENCY_HEADER = "Idempotency-Key"


def idempotency_token(run_id: str, key: str) -> str:
    """The token naming one call of one run: the same for every attempt at it, on any
    machine (a shard sent again after a crash), and different for another run, which must
    pay for its own calls. The header adds the re-ask number (``idempotency_header``)."""
    return "eb-" + sha256_hex(f"{run_id}\n{key}")[:40]


def idempotency_header(token: str, reasks: int) -> str:
    """A re-ask is a new request, whose answer must not be the one it re-asks about (an
    empty reply is re-asked with the very same body)."""
    return f"{token}-r{reasks}"


def token_of_header(header: str) -> str:
    """The call's token in an ``idempotency_header`` value (the re-ask number dropped)."""
    return header.rpartition("-r")[0]


def estimate_tokens(messages: tuple[Message, ...] | list[Message], max_tokens: int) -> int:
    """A deliberately high estimate for TPM budgeting: one token per character plus the
    reply allowance (Chinese runs ~0.7-1.6 tokens per character across tokenizers)."""
    return sum(len(m.content) for m in messages) + max(0, max_tokens)


@dataclass
class _Attempt:
    """What one HTTP exchange produced."""

    payload: dict[str, Any] | None = None
    transient: bool = False
    error_kind: str | None = None
    error: str | None = None
    retry_after: float | None = None
    latency_s: float = 0.0


@dataclass
class _Totals:
    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    any_usage: bool = False
    # cached input over the attempts; None once one of them reported no believable figure
    cached_input_tokens: int | None = 0
    unbelievable: bool = False  # an attempt's input or output count was not a count

    def add_usage(self, usage: Any) -> None:
        if not usage or not isinstance(usage, dict):
            return
        read = openai_usage(usage)  # untrusted counts: llm.usage
        self.any_usage = True
        if read.input_tokens is None or read.output_tokens is None:
            self.unbelievable = True
            return
        self.input_tokens += read.input_tokens
        self.output_tokens += read.output_tokens
        self.cached_input_tokens = (None if self.cached_input_tokens is None
                                    or read.cached_input_tokens is None
                                    else self.cached_input_tokens + read.cached_input_tokens)

    def usage(self) -> Usage:
        """The call's usage; unknown (all None) without usage or with an unbelievable one."""
        if not self.any_usage or self.unbelievable:
            return Usage()
        return Usage(self.input_tokens, self.output_tokens, self.cached_input_tokens)


COMPLETIONS = "/chat/completions"


@register_backend("openai")
class OpenAICompatBackend:
    """Chat completions over HTTP, for any OpenAI-compatible endpoint (``protocol:
    openai``, the registry's default)."""

    def __init__(
        self,
        spec: ModelSpec,
        base_url: str | ReplicaPool | None = None,
        *,
        limiter: Limiter | None = None,
        backoff: Backoff | None = None,
        seed: int | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.spec = spec
        # The URL actually dialled (or, for several replicas, chosen per request); the
        # configured one (spec.base_url) stays in the key, so an embedded server on a new
        # port still hits the same ledger entries.
        self.pool = base_url if isinstance(base_url, ReplicaPool) else None
        first = self.pool.urls[0] if self.pool is not None else (base_url or spec.base_url)
        assert isinstance(first, str)
        self.url = first.rstrip("/") + COMPLETIONS
        self.limiter = limiter or EndpointLimiter(spec.max_concurrency, spec.rpm, spec.tpm)
        self.backoff = backoff or Backoff()
        self.rng = random.Random(seed)
        self.sleep = sleep
        self._http: aiohttp.ClientSession | None = None  # made in the running loop
        # connect: the TCP connection; read: between reads of the reply; the connection
        # pool wait (aiohttp's "connect") has the read timeout, as httpx's pool timeout had.
        self._timeout = aiohttp.ClientTimeout(sock_connect=spec.connect_timeout_s,
                                              sock_read=spec.timeout_s, connect=spec.timeout_s)

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None:
            # HTTP(S)_PROXY and NO_PROXY apply as they do for httpx's own client; aiohttp
            # re-reads them on every request when told to (~0.9 ms CPU), so only then. The
            # one cached TLS context: a default one loads the CA store (~50 ms) per batch.
            self._http = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.spec.max_concurrency,
                                               ssl=_tls_context()),
                trust_env=bool(urllib.request.getproxies()))
        return self._http

    async def aclose(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.close()

    def _headers(self, idempotency: str | None) -> dict[str, str]:
        key = self.spec.api_key()
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        if idempotency is not None:
            headers[IDEMPOTENCY_HEADER] = idempotency
        return headers

    async def _send(self, data: bytes, estimated: int, affinity: str,
                    idempotency: str | None) -> _Attempt:
        async with self.limiter.slot(estimated):
            if self.pool is None:
                return await self._post(self.url, data, idempotency)
            with self.pool.lease(affinity) as base:  # held while the request runs
                attempt = await self._post(base + COMPLETIONS, data, idempotency)
            if attempt.error_kind == CONNECTION_REFUSED:  # its server is gone: retry elsewhere
                self.pool.mark_down(base)
            return attempt

    async def _post(self, url: str, data: bytes, idempotency: str | None) -> _Attempt:
        started = time.perf_counter()
        try:
            async with self._session().post(url, data=data, headers=self._headers(idempotency),
                                            timeout=self._timeout,
                                            allow_redirects=False) as response:
                content = await response.read()
                status = response.status
                reason = response.reason or httpx.codes.get_reason_phrase(status)
                retry_after = response.headers.get("retry-after")
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            elapsed = time.perf_counter() - started
            failure = classify_transport_error(
                exc, elapsed, _host_port(url), connect_timeout_s=self.spec.connect_timeout_s,
                read_timeout_s=self.spec.timeout_s)
            return _Attempt(transient=failure.transient, error_kind=failure.kind,
                            error=failure.message[:ERROR_TEXT_LIMIT], latency_s=elapsed)
        latency = time.perf_counter() - started
        if status != 200:
            code, message = _error_fields(content, reason)
            transient, kind = classify_http_error(status, code, message)
            return _Attempt(transient=transient, error_kind=kind, latency_s=latency,
                            error=f"HTTP {status}: {message}"[:ERROR_TEXT_LIMIT],
                            retry_after=parse_retry_after(retry_after))
        try:
            payload = json.loads(content)
            message = payload["choices"][0]["message"]
            if not isinstance(message, dict):
                raise TypeError("message is not an object")
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, IndexError, TypeError) as exc:
            # A 200 with a garbled body is what a proxy or a dropped stream produces.
            return _Attempt(transient=True, error_kind="bad_response", latency_s=latency,
                            error=f"unreadable 200 body ({type(exc).__name__}): "
                                  f"{content.decode('utf-8', 'replace')[:200]!r}")
        return _Attempt(payload=payload, latency_s=latency)

    async def complete(self, request: ChatRequest, key: str | None = None,
                       idempotency: str | None = None) -> ChatResult:
        """``idempotency``: sent (with the re-ask number) when the registry entry allows;
        a transient retry repeats it, since the provider may have answered the request."""
        spec = self.spec
        token = idempotency if spec.idempotency_key else None
        key = key or request_key(spec, request)
        started_at = datetime.now(UTC)
        messages = list(request.messages)
        params = spec.effective_params(request.params)
        totals = _Totals()
        retries = reasks = 0
        affinity = affinity_of(messages) if self.pool is not None else ""
        last: _Attempt | None = None
        text: str | None = None

        def finish(status: CallStatus, **kw: Any) -> ChatResult:
            usage = totals.usage()
            finished_at = datetime.now(UTC)
            cost = (spec.cost_usd(usage.input_tokens, usage.output_tokens,
                                  usage.cached_input_tokens, finished_at=finished_at)
                    if totals.any_usage else None)
            return ChatResult(key=key, model=spec.name, status=status, usage=usage,
                              cost_usd=cost, attempts=totals.attempts, retries=retries,
                              reasks=reasks,
                              latency_s=last.latency_s if last else 0.0,
                              started_at=started_at, finished_at=finished_at,
                              stage=request.stage, tag=request.tag, **kw)

        while True:
            body = spec.request_json(messages, request.params, request.response_schema)
            estimated = estimate_tokens(messages, int(params.get("max_tokens") or 0))
            totals.attempts += 1
            last = await self._send(body, estimated, affinity,
                                    None if token is None else idempotency_header(token, reasks))
            if last.payload is None:
                if last.transient and retries < spec.max_retries:
                    if last.retry_after is not None:
                        self.limiter.pause(last.retry_after)
                    await self.sleep(self.backoff.delay(retries, self.rng, last.retry_after))
                    retries += 1
                    continue
                status = (CallStatus.REFUSED if last.error_kind == "content_filter"
                          else CallStatus.API_ERROR)
                suffix = (f" (after {retries} {'retry' if retries == 1 else 'retries'})"
                          if last.transient else "")
                return finish(status, error_kind=last.error_kind,
                              error=(last.error or "") + suffix, text=text)

            payload = last.payload
            totals.add_usage(payload.get("usage"))
            reading = read_reply(spec, request, payload, messages, reasks)
            text = reading.fields["text"]
            if reading.status is None:  # empty, or broke the schema: re-ask (llm.reply)
                assert reading.messages is not None
                reasks += 1
                messages = reading.messages
                continue
            return finish(reading.status, **reading.fields)


def _host_port(url: str) -> str:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.hostname}:{port}"


@cache
def _tls_context() -> ssl.SSLContext:
    return ssl.create_default_context()


def _error_fields(content: bytes, reason: str) -> tuple[str | None, str]:
    try:
        err = json.loads(content).get("error")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return None, content.decode("utf-8", "replace")[:ERROR_TEXT_LIMIT] or reason
    if isinstance(err, dict):
        code = err.get("code") or err.get("type")
        return (str(code) if code is not None else None), str(err.get("message", ""))
    return None, str(err)[:ERROR_TEXT_LIMIT]
