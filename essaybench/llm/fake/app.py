"""The fake OpenAI-compatible server's ASGI app: chat completions, faults and counters.

Run it with :mod:`essaybench.llm.fake.server`, whose uvicorn protocol puts the
connection's transport in the scope under ``TRANSPORT_SCOPE_KEY``: the ``hang`` and
``drop`` faults need it to close a connection without any HTTP response, which
an ASGI app cannot otherwise do (uvicorn answers 500 for an app that sends nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import socket
import struct
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from essaybench.core.hashing import canonical_json, sha256_hex
from essaybench.llm.fake.batch_store import BatchCounters, BatchStore
from essaybench.llm.fake.embeddings import PATH as EMBEDDINGS_PATH
from essaybench.llm.fake.embeddings import embeddings
from essaybench.llm.fake.idempotency import (
    IDEMPOTENCY_HEADER,
    REPLAYED_HEADER,
    IdempotencyRecords,
    KeyConflict,
    Stored,
)
from essaybench.llm.fake.protocol import (
    DEFAULT_CODE,
    ChatFields,
    auth_error,
    bearer_token,
    completion_body,
    count_tokens,
    cut_to_tokens,
    error_response,
    parse_chat,
)
from essaybench.llm.fake.scenario import (
    WILDCARD,
    DropFault,
    EmptyContentFault,
    FakeScenario,
    FaultRule,
    FinishReasonFault,
    HangFault,
    InvalidStructuredFault,
    MalformedJsonFault,
    ModelScenario,
    StatusFault,
    TruncatedJsonFault,
    unit_hash,
)
from essaybench.llm.fake.schema import generate_instance, violate
from essaybench.llm.fake.usage import usage_fields

TRANSPORT_SCOPE_KEY = "essaybench.transport"
CHAT_PATH = "/v1/chat/completions"


class FakeState:
    """Counters and arrival-order bookkeeping; touched only on the server's event loop."""

    def __init__(self, scenario: FakeScenario) -> None:
        self.scenario = scenario
        self.expected_key = scenario.expected_api_key()
        self.stopping = False
        self.batch_store = BatchStore(scenario.batch)  # batches and files outlive a reset
        # The server's capacity (scenario.capacity): asyncio's semaphore wakes waiters in
        # the order they came, a server's queue. Live counts outlive a reset; peaks do not.
        self.slots = (asyncio.Semaphore(scenario.capacity) if scenario.capacity is not None
                      else None)
        self.in_service = self.queued = 0
        self.reset()

    def reset(self) -> None:
        self.received: dict[str, int] = {}
        self.completed: dict[str, int] = {}
        self.model_received: Counter[str] = Counter()
        self.model_completed: Counter[str] = Counter()
        self.by_status: Counter[int] = Counter()
        self.faults: Counter[str] = Counter()
        self.rejected = 0
        self.ordinals: dict[str, dict[str, int]] = {}
        self.rule_seen = [0] * len(self.scenario.faults)
        self.replayed: dict[str, int] = {}
        self.tokens: dict[str, int] = {}  # arrivals by Idempotency-Key, honoured or not
        self.idempotency = IdempotencyRecords()
        self.batch_store.counters = BatchCounters()
        self.in_service_peak, self.queued_peak = self.in_service, self.queued

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[float]:
        """Hold one of the server's ``capacity`` slots while a request is served (waiting
        in arrival order for one); yields when its service began."""
        assert self.slots is not None
        self.queued += 1
        self.queued_peak = max(self.queued_peak, self.queued)
        try:
            await self.slots.acquire()
        finally:
            self.queued -= 1
        self.in_service += 1
        self.in_service_peak = max(self.in_service_peak, self.in_service)
        try:
            yield asyncio.get_running_loop().time()
        finally:
            self.in_service -= 1
            self.slots.release()

    def arrive(self, key: str, model: str) -> int:
        """Count one arrival; return its attempt number for this body (1-based)."""
        self.received[key] = attempt = self.received.get(key, 0) + 1
        self.model_received[model] += 1
        return attempt

    def ordinal(self, model: str, key: str) -> int:
        """1-based rank of this distinct body among those sent to ``model``, by first arrival."""
        seen = self.ordinals.setdefault(model, {})
        return seen.setdefault(key, len(seen) + 1)

    def match_fault(self, key: str, attempt: int, model: str, structured: bool) -> FaultRule | None:
        hit: FaultRule | None = None
        for i, rule in enumerate(self.scenario.faults):
            if rule.eligible(model, structured):
                self.rule_seen[i] += 1  # every eligible request counts, matched or not
                if hit is None and rule.applies(key, attempt, self.rule_seen[i]):
                    hit = rule
        return hit

    def stats(self, per_key: bool = False) -> dict[str, Any]:
        completed = Counter(self.completed.get(k, 0) for k in self.received)
        received = Counter(self.received.values())
        out: dict[str, Any] = {
            "totals": {
                "received": sum(self.received.values()),
                "completed": sum(self.completed.values()),
                "replayed": sum(self.replayed.values()),
                "rejected": self.rejected,
                "distinct_keys": len(self.received),
                "by_status": {str(s): n for s, n in sorted(self.by_status.items())},
                "faults": dict(sorted(self.faults.items())),
                "cpu_s": _cpu_s(),
                "in_service_peak": self.in_service_peak,
                "queued_peak": self.queued_peak,
            },
            "per_model": {m: {"received": n, "completed": self.model_completed[m]}
                          for m, n in sorted(self.model_received.items())},
            "completed_per_key": {str(i): completed[i]
                                  for i in range(max([2, *completed]) + 1)},
            "received_per_key": {str(i): received[i] for i in range(1, max([1, *received]) + 1)},
        }
        if per_key:
            out["per_key"] = {k: {"received": n, "completed": self.completed.get(k, 0),
                                  "replayed": self.replayed.get(k, 0)}
                              for k, n in self.received.items()}
            out["per_token"] = dict(self.tokens)
        out["batch"] = self.batch_store.counters.stats(per_key)
        return out


class ChatEndpoint:
    """POST /v1/chat/completions as a raw ASGI app, so it may also answer with nothing."""

    def __init__(self, state: FakeState) -> None:
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        st = self.state
        arrived = asyncio.get_running_loop().time()
        request = Request(scope, receive)
        response = None if st.expected_key is None else auth_error(
            st.expected_key, request.headers.get("authorization"))
        counted: tuple[str, str] | None = None
        if response is None:
            try:
                body = json.loads(await request.body())
            except ValueError:  # JSONDecodeError and UnicodeDecodeError
                st.rejected += 1
                response = error_response(400, "We could not parse the JSON body of your request.")
            else:
                idempotency = request.headers.get(IDEMPOTENCY_HEADER)
                if idempotency is not None:
                    st.tokens[idempotency] = st.tokens.get(idempotency, 0) + 1
                    if not st.scenario.honour_idempotency_key:
                        idempotency = None
                token = bearer_token(request.headers.get("authorization"))
                if idempotency is None:
                    answer = await self._answer(scope, body, arrived, token)
                else:
                    answer = await self._answer_once(scope, body, arrived, token, idempotency)
                if answer is None:
                    return  # the connection was hung up or dropped on purpose
                response, counted = answer
        else:
            st.rejected += 1
        await response(scope, receive, send)
        st.by_status[response.status_code] += 1
        transport = scope.get(TRANSPORT_SCOPE_KEY)
        # "Completed" means the last byte went to a connection that is still open.
        if counted is not None and (transport is None or not transport.is_closing()):
            key, model = counted
            st.completed[key] = st.completed.get(key, 0) + 1
            st.model_completed[model] += 1

    async def _answer_once(self, scope: Scope, body: Any, arrived: float,
                           presented_key: str | None, idempotency: str
                           ) -> tuple[Response, tuple[str, str] | None] | None:
        """``_answer``, or the answer recorded under the request's Idempotency-Key."""
        st = self.state
        body_key = sha256_hex(canonical_json(body))
        try:
            stored = await st.idempotency.claim(idempotency, body_key)
        except KeyConflict:
            st.rejected += 1
            return error_response(422, "This Idempotency-Key was used with another request.",
                                  code="idempotency_key_reused"), None
        if stored is not None:
            st.replayed[body_key] = st.replayed.get(body_key, 0) + 1
            return Response(stored.payload, 200, media_type="application/json",
                            headers={REPLAYED_HEADER: "true"}), None
        kept: Stored | None = None
        try:
            answer = await self._answer(scope, body, arrived, presented_key)
            if answer is not None and answer[1] is not None:
                kept = Stored(body_key, bytes(answer[0].body), answer[1][1])
            return answer
        finally:
            st.idempotency.settle(idempotency, kept)

    async def _answer(self, scope: Scope, body: Any, arrived: float, presented_key: str | None
                      ) -> tuple[Response, tuple[str, str] | None] | None:
        """The response and, for a clean completion, the (key, model) to count; None: no reply.
        ``presented_key``: the request's bearer token (a status fault may echo it).

        The configured latency runs from the request's arrival, as a real API's does: the
        fake's own work (parsing, building the reply) happens inside it, not on top of it.
        With a ``capacity`` it runs from when one of the server's slots takes the request.
        """
        st = self.state
        chat = parse_chat(body)
        if isinstance(chat, str):
            st.rejected += 1
            return error_response(400, chat), None
        cfg = st.scenario.model(chat.model)
        if cfg is None:
            st.rejected += 1
            return error_response(404, f"The model `{chat.model}` does not exist."), None
        if cfg.context_window is not None and (
                chat.prompt_tokens + (chat.max_tokens or 0) > cfg.context_window):
            st.rejected += 1
            return error_response(
                400, f"This model's maximum context length is {cfg.context_window} tokens; "
                     f"you requested {chat.prompt_tokens + (chat.max_tokens or 0)}.",
                code="context_length_exceeded"), None
        key = sha256_hex(canonical_json(body))
        attempt = st.arrive(key, chat.model)
        # A fault's attempt number counts this body's batch lines too (fake/batch_engine.py).
        rule = st.match_fault(key, attempt + st.batch_store.counters.keys[key], chat.model,
                              chat.structured)
        if rule is not None:
            st.faults[rule.kind] += 1
        if isinstance(rule, StatusFault):
            code = DEFAULT_CODE if rule.code is None else rule.code
            return error_response(rule.status, rule.message_for(presented_key), code,
                                  rule.retry_after), None
        if isinstance(rule, HangFault):
            await self._hang(scope, rule.seconds)
            return None
        try:
            content = self._content(cfg, chat, key, rule)
        except (ValueError, KeyError, TypeError) as exc:
            return error_response(400, f"Unusable JSON schema: {exc}"), None
        if st.slots is None:
            await _sleep_out(cfg.latency_s(key, attempt), arrived)
        else:
            async with st.serving() as began:
                await _sleep_out(cfg.latency_s(key, attempt), began)
        if isinstance(rule, DropFault):
            await _kill(_transport(scope), reset=rule.how == "reset")
            return None
        if isinstance(rule, MalformedJsonFault):
            return Response(rule.body, 200, media_type="application/json"), None
        finish = "stop"
        if isinstance(rule, EmptyContentFault):
            content = ""
        elif isinstance(rule, FinishReasonFault):
            finish = rule.finish_reason
            content = content[: len(content) // 2] if rule.content == "partial" else ""
        elif (cfg.enforce_max_tokens and chat.max_tokens is not None
              and count_tokens(content) > chat.max_tokens):
            content, finish = cut_to_tokens(content, chat.max_tokens), "length"
        completion = completion_body(chat, cfg.returned_model or chat.model,
                                     f"chatcmpl-fake{key[:20]}{attempt}", content, finish,
                                     usage_fields(cfg, chat))
        payload = json.dumps(completion, ensure_ascii=False)
        if isinstance(rule, TruncatedJsonFault):
            payload = payload[: int(len(payload) * rule.fraction)]
        clean = rule is None and finish == "stop"
        return Response(payload, 200, media_type="application/json"), (
            (key, chat.model) if clean else None)

    def _content(self, cfg: ModelScenario, chat: ChatFields, key: str,
                 rule: FaultRule | None) -> str:
        st = self.state
        if isinstance(rule, InvalidStructuredFault):
            if rule.variant == "not_json" or chat.schema is None:
                return "好的，以下是结果：评分很高，理由充分。"  # prose where JSON was asked for
            valid = generate_instance(chat.schema, _seed(key, st.scenario.seed))
            return json.dumps(violate(chat.schema, valid), ensure_ascii=False)
        for reply_rule in cfg.rules:
            if reply_rule.matches(chat.first_prompt):
                return reply_rule.content(chat.schema)
        if chat.structured and cfg.structured == "script":
            script = cfg.structured_script
            return script[(st.ordinal(chat.model, key) - 1) % len(script)]
        if chat.structured and cfg.structured == "schema":
            if chat.schema is None:
                return json.dumps({"reply": self._plain(cfg, chat, key)}, ensure_ascii=False)
            return json.dumps(generate_instance(chat.schema, _seed(key, st.scenario.seed)),
                              ensure_ascii=False)
        return self._plain(cfg, chat, key)

    def _plain(self, cfg: ModelScenario, chat: ChatFields, key: str) -> str:
        if cfg.reply == "echo":
            return chat.prompt
        n = self.state.ordinal(chat.model, key)
        if cfg.reply == "script":
            return cfg.script[(n - 1) % len(cfg.script)]
        assert cfg.template is not None  # the scenario validator guarantees it
        return cfg.template.format(prompt=chat.prompt, n=n, model=chat.model, key=key[:12])

    async def _hang(self, scope: Scope, seconds: float) -> None:
        transport = _transport(scope)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        # Poll rather than sleep it out: stop early when the client gives up or we shut down.
        while not transport.is_closing() and not self.state.stopping:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            await asyncio.sleep(min(0.05, remaining))
        await _kill(transport, reset=False)


async def _sleep_out(latency_s: float, since: float) -> None:
    """Sleep until ``latency_s`` after ``since`` (the loop's clock)."""
    delay = latency_s - (asyncio.get_running_loop().time() - since)
    if delay > 0:  # sleep(0) would only cost an event-loop turn per request
        await asyncio.sleep(delay)


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _seed(key: str, seed: int) -> int:
    return int(unit_hash("schema", key, seed) * 2**52)


def _transport(scope: Scope) -> asyncio.Transport:
    transport = scope.get(TRANSPORT_SCOPE_KEY)
    if transport is None:
        raise RuntimeError("hang/drop faults need the fake's own server (fake/server.py)")
    assert isinstance(transport, asyncio.Transport)
    return transport


async def _kill(transport: asyncio.Transport, *, reset: bool) -> None:
    """Close the connection with no response: RST (linger 0 + abort) or a plain FIN."""
    if reset:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
    else:
        transport.close()
    # Let connection_lost run before we return, so uvicorn sees the client gone and does
    # not try to send its own 500.
    for _ in range(3):
        await asyncio.sleep(0)


class _ChatFirst:
    """Chat completions straight to their endpoint; every other request through Starlette.

    Nearly every request a run makes is a chat completion, and Starlette's router and
    exception middleware only cost it CPU. ServerErrorMiddleware stays, so an unexpected
    error still gets the same plain 500 as through Starlette.
    """

    def __init__(self, chat: ChatEndpoint, rest: Starlette) -> None:
        self.chat = ServerErrorMiddleware(chat)
        self.rest = rest

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] == "http" and scope["path"] == CHAT_PATH
                and scope["method"] == "POST"):
            await self.chat(scope, receive, send)
        else:
            await self.rest(scope, receive, send)


def build_app(state: FakeState, routes: tuple[BaseRoute, ...] = ()) -> ASGIApp:
    """The ASGI app serving ``state``'s scenario; ``routes``: more endpoints (the batch APIs)."""

    async def models(request: Request) -> Response:
        bad = auth_error(state.expected_key, request.headers.get("authorization"))
        if bad is not None:
            return bad
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "essaybench-fake"}
                for name in state.scenario.models if name != WILDCARD]
        return Response(json.dumps({"object": "list", "data": data}),
                        media_type="application/json")

    async def health(request: Request) -> Response:
        return Response('{"status":"ok"}', media_type="application/json")

    async def stats(request: Request) -> Response:
        per_key = request.query_params.get("per_key") in ("1", "true")
        return Response(json.dumps(state.stats(per_key)), media_type="application/json")

    async def reset(request: Request) -> Response:
        state.reset()
        return Response('{"reset":true}', media_type="application/json")

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        return error_response(status, f"{request.method} {request.url.path}: "
                                      f"{'unknown route' if status == 404 else 'not allowed'}",
                              code=None)

    chat = ChatEndpoint(state)
    # The chat route stays in the router too: other methods on its path get its 405.
    return _ChatFirst(chat, Starlette(routes=[
        Route(CHAT_PATH, chat, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route(EMBEDDINGS_PATH, embeddings, methods=["POST"]),
        Route("/health", health, methods=["GET"]),
        Route("/_fake/stats", stats, methods=["GET"]),
        Route("/_fake/reset", reset, methods=["POST"]),
        *routes,
    ], exception_handlers={HTTPException: http_error}))
