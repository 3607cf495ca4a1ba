"""Anthropic's Message Batches API on the fake: create, retrieve, list, results, cancel.

Routes (key in ``x-api-key`` or ``Authorization: Bearer``, if the scenario has one)::

    POST /v1/messages/batches                   {"requests": [{custom_id, params}, ...]}
    GET  /v1/messages/batches[?limit&after_id]  newest first
    GET  /v1/messages/batches/{id}
    GET  /v1/messages/batches/{id}/results      JSONL, once processing_status is "ended"
    POST /v1/messages/batches/{id}/cancel

Shapes follow Anthropic's API reference as stored in the docs we read
(platform.claude.com/docs/en/api/messages/batches/{create,retrieve,results,cancel}, and
docs.anthropic.com/en/api/messages-batch-examples): the ``message_batch`` object with
``processing_status`` in_progress / canceling / ended, ``request_counts`` {processing,
succeeded, errored, canceled, expired}, RFC 3339 times and ``results_url`` (null until
ended); result lines ``{custom_id, result}`` with ``result.type`` succeeded (``message``),
errored (``error: {type: "error", error: {type, message}}``), canceled or expired, in no
particular order; ``custom_id`` 1–64 characters, unique within the batch; structured output
asked with ``output_config.format = {type: "json_schema", schema}`` (the beta's
``output_format`` is read too).

The request list is checked when the batch is created (a bad entry: 400 naming
``requests.N``); each entry's ``params`` are checked when it is processed, as Anthropic
does, so a bad params object is one ``errored`` result. Params become the chat body a
direct call would send (system first, text blocks joined), answered by :mod:`.batch_engine`.
"""

from __future__ import annotations

import hmac
import json
import re
import uuid
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from essaybench.core.hashing import sha256_hex
from essaybench.llm.fake.app import FakeState
from essaybench.llm.fake.batch_engine import BatchEngine
from essaybench.llm.fake.batch_input import strict_json
from essaybench.llm.fake.batch_store import Batch, Item, LineOutcome
from essaybench.llm.fake.protocol import bearer_token

_CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                403: "permission_error", 404: "not_found_error", 408: "timeout_error",
                413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
                502: "api_error", 503: "overloaded_error", 504: "timeout_error",
                529: "overloaded_error", 0: "timeout_error"}
_STOP = {"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal"}


def _error(status: int, message: str) -> Response:
    body = {"type": "error", "error": {"type": _ERROR_TYPES.get(status, "api_error"),
                                       "message": message},
            "request_id": f"req_fake{uuid.uuid4().hex[:20]}"}
    return Response(json.dumps(body), status, media_type="application/json")


def _time(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
            isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
            for b in content):
        return "".join(b["text"] for b in content)
    raise ValueError(f"{where}: a string or a list of text blocks "
                     "(the fake reads text content only)")


def to_chat(params: Any) -> dict[str, Any]:
    """The chat-completions body for a Messages API params object; ValueError names the field."""
    if not isinstance(params, dict):
        raise ValueError("params: must be an object")
    model, max_tokens, messages = (params.get("model"), params.get("max_tokens"),
                                   params.get("messages"))
    if not isinstance(model, str) or not model:
        raise ValueError("params.model: Field required")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise ValueError("params.max_tokens: Field required (an integer >= 1)")
    if not isinstance(messages, list) or not messages:
        raise ValueError("params.messages: Field required (a non-empty list)")
    chat_messages = []
    if "system" in params:
        chat_messages.append({"role": "system", "content": _text(params["system"],
                                                                 "params.system")})
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            raise ValueError(f"params.messages.{i}.role: 'user' or 'assistant'")
        chat_messages.append({"role": m["role"],
                              "content": _text(m.get("content"), f"params.messages.{i}.content")})
    chat: dict[str, Any] = {"model": model, "messages": chat_messages, "max_tokens": max_tokens}
    for key in ("temperature", "top_p"):
        if key in params:
            chat[key] = params[key]
    config = params.get("output_config")
    fmt = config.get("format") if isinstance(config, dict) else params.get("output_format")
    if fmt is not None:
        if not (isinstance(fmt, dict) and fmt.get("type") == "json_schema"
                and isinstance(fmt.get("schema"), dict)):
            raise ValueError("params.output_config.format: {type: 'json_schema', schema: {...}}")
        chat["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "output", "schema": fmt["schema"]}}
    return chat


def message_of(completion: dict[str, Any], model: str) -> dict[str, Any]:
    """A chat.completion as the Messages API's ``message`` object."""
    choice, usage = completion["choices"][0], completion["usage"]
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if not isinstance(cached, int) or not 0 <= cached <= usage["prompt_tokens"]:
        cached = 0  # what the provider's reply left out, or garbled
    return {"id": "msg_" + completion["id"].removeprefix("chatcmpl-"), "type": "message",
            "role": "assistant", "model": completion.get("model") or model,
            "content": [{"type": "text", "text": choice["message"]["content"]}],
            "stop_reason": _STOP.get(choice["finish_reason"], "end_turn"),
            "stop_sequence": None,
            "usage": {"input_tokens": usage["prompt_tokens"] - cached,
                      "output_tokens": usage["completion_tokens"],
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": cached,
                      "service_tier": "batch"}}


def result_of(item: Item) -> dict[str, Any]:
    outcome = item.outcome
    if item.kind in ("expired", "canceled") or outcome is None:
        return {"type": item.kind or "canceled"}
    if outcome.status == 200 and outcome.body is not None:
        return {"type": "succeeded", "message": message_of(outcome.body, "")}
    message = ((outcome.body or {}).get("error") or outcome.error or {}).get("message", "")
    return {"type": "errored", "error": {
        "type": "error", "request_id": None,
        "error": {"type": _ERROR_TYPES.get(outcome.status, "api_error"), "message": message}}}


class AnthropicBatches:
    def __init__(self, state: FakeState) -> None:
        self.state = state
        self.store = state.batch_store
        self.engine = BatchEngine(state)

    def respond(self, item: Item) -> LineOutcome:
        try:
            chat = to_chat(item.request)
        except ValueError as exc:
            return LineOutcome(400, {"error": {"message": str(exc)}})
        return self.engine.answer(chat)

    def batch_object(self, batch: Batch, request: Request) -> dict[str, Any]:
        counts = batch.counts()
        ended = batch.phase == "ended"
        status = ("ended" if ended else
                  "canceling" if batch.cancel_requested.is_set() else "in_progress")
        results_url = str(request.url_for("anthropic_results", batch_id=batch.id))
        return {"id": batch.id, "type": "message_batch", "processing_status": status,
                "request_counts": {k: counts[k] for k in ("processing", "succeeded", "errored",
                                                          "canceled", "expired")},
                "ended_at": _time(batch.stamps.get(batch.end or "")) if ended else None,
                "created_at": _time(batch.created_at), "expires_at": _time(batch.expires_at),
                "archived_at": None, "cancel_initiated_at": _time(batch.stamps.get("cancelling")),
                "results_url": results_url if ended else None}

    def _find(self, request: Request) -> Batch | Response:
        batch_id = request.path_params["batch_id"]
        batch = self.store.batches.get(batch_id)
        if batch is None or batch.protocol != "anthropic":
            return _error(404, f"message_batch '{batch_id}' not found")
        return batch

    async def create(self, request: Request) -> Response:
        raw = await request.body()
        if len(raw) > self.store.scenario.max_file_bytes:
            return _error(413, "Request exceeds the maximum allowed number of bytes.")
        body = strict_json(raw)
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not requests:
            return _error(400, "requests: Field required (a non-empty list)")
        if len(requests) > self.store.scenario.max_lines:
            return _error(400, f"requests: at most {self.store.scenario.max_lines} requests "
                               "per Message Batch")
        seen: set[str] = set()
        items = []
        for i, entry in enumerate(requests):
            custom_id = entry.get("custom_id") if isinstance(entry, dict) else None
            if not isinstance(custom_id, str) or not _CUSTOM_ID.fullmatch(custom_id):
                return _error(400, f"requests.{i}.custom_id: 1 to 64 characters from "
                                   "[a-zA-Z0-9_-]")
            if custom_id in seen:
                return _error(400, f"requests.{i}.custom_id: duplicate custom_id "
                                   f"'{custom_id}'; each must be unique within the batch")
            if not isinstance(entry.get("params"), dict):
                return _error(400, f"requests.{i}.params: Field required (an object)")
            seen.add(custom_id)
            items.append(Item(custom_id, entry["params"]))
        if self.store.forced_failure():
            return _error(429, "Number of batch requests in queue exceeds your limit; "
                               "try again once some batches have ended.")
        batch = self.store.create(f"msgbatch_01{uuid.uuid4().hex[:22]}", "anthropic", items,
                                  self.respond, lambda batch: None)
        return self._json(self.batch_object(batch, request))

    async def retrieve(self, request: Request) -> Response:
        batch = self._find(request)
        if isinstance(batch, Response):
            return batch
        response = self._json(self.batch_object(batch, request))
        self.store.polled(batch)
        return response

    async def results(self, request: Request) -> Response:
        batch = self._find(request)
        if isinstance(batch, Response):
            return batch
        if batch.phase != "ended":
            return _error(400, f"Message Batch {batch.id} has not ended yet; results are "
                               "available once processing_status is 'ended'.")
        lines = [json.dumps({"custom_id": item.custom_id, "result": result_of(item)},
                            ensure_ascii=False)
                 for item in sorted(batch.items,
                                    key=lambda i: sha256_hex(f"{batch.id}:{i.custom_id}"))]
        self.store.counters.result_downloads += 1
        self.store.counters.results_served += len(lines)
        return Response("".join(line + "\n" for line in lines),
                        media_type="application/x-jsonl")

    async def cancel(self, request: Request) -> Response:
        batch = self._find(request)
        if isinstance(batch, Response):
            return batch
        if not self.store.cancel(batch):
            return _error(400, f"Message Batch {batch.id} has already ended.")
        return self._json(self.batch_object(batch, request))

    async def list(self, request: Request) -> Response:
        try:
            limit = min(1000, max(1, int(request.query_params.get("limit", "20"))))
        except ValueError:
            return _error(400, "limit: an integer from 1 to 1000")
        ids = [b.id for b in reversed(self.store.batches.values()) if b.protocol == "anthropic"]
        after = request.query_params.get("after_id")
        if after in ids:
            ids = ids[ids.index(after) + 1:]
        page = [self.batch_object(self.store.batches[i], request) for i in ids[:limit]]
        return self._json({"data": page, "has_more": len(ids) > limit,
                           "first_id": page[0]["id"] if page else None,
                           "last_id": page[-1]["id"] if page else None})

    @staticmethod
    def _json(payload: Any) -> Response:
        return Response(json.dumps(payload, ensure_ascii=False), media_type="application/json")

    def _denied(self, request: Request) -> Response | None:
        expected = self.state.expected_key
        if expected is None:
            return None
        presented = (request.headers.get("x-api-key")
                     or bearer_token(request.headers.get("authorization")) or "")
        if hmac.compare_digest(presented.encode(), expected.encode()):
            return None
        return _error(401, "invalid x-api-key")  # never echo the key

    def routes(self) -> tuple[BaseRoute, ...]:
        def guarded(handler: Any) -> Any:
            async def endpoint(request: Request) -> Response:
                denied = self._denied(request)
                return denied if denied is not None else await handler(request)
            return endpoint

        base = "/v1/messages/batches"
        return (Route(base, guarded(self.create), methods=["POST"]),
                Route(base, guarded(self.list), methods=["GET"]),
                Route(base + "/{batch_id}", guarded(self.retrieve), methods=["GET"]),
                Route(base + "/{batch_id}/results", guarded(self.results), methods=["GET"],
                      name="anthropic_results"),
                Route(base + "/{batch_id}/cancel", guarded(self.cancel), methods=["POST"]))
