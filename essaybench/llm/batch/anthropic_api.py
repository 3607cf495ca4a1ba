"""Anthropic's Message Batches: ``POST /messages/batches {requests: [{custom_id, params}]}``,
``processing_status`` in_progress -> canceling -> ended, then JSONL results with
``result.type`` succeeded | errored | canceled | expired, in no particular order.

``params`` are the direct call's body in the Messages API's terms (system messages joined
into ``system``; a schema as ``output_config.format``); a succeeded message is put back in
chat.completion shape (text blocks joined, ``stop_reason`` as ``finish_reason``, the usage
block with cache reads as cached input) so ``llm.reply`` reads it as a direct reply.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import httpx

from essaybench.llm.batch.wire import (
    BatchApiError,
    BatchItem,
    BatchState,
    Line,
    check_custom_id,
    http_error,
)
from essaybench.llm.registry import ModelSpec
from essaybench.llm.usage import anthropic_usage

__all__ = ["AnthropicBatchApi", "message_params"]

VERSION = "2023-06-01"
_PASSED = {"temperature", "top_p", "top_k"}
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
           "refusal": "content_filter"}
_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
           "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429,
           "api_error": 500, "overloaded_error": 529, "timeout_error": 408}


def message_params(spec: ModelSpec, item: BatchItem) -> dict[str, Any]:
    """The Messages API params of a direct call's body; ValueError names what cannot go."""
    request = item.request
    body = json.loads(spec.request_json(request.messages, request.params,
                                        request.response_schema))
    params: dict[str, Any] = {"model": body.pop("model")}
    messages = body.pop("messages")
    system = [m["content"] for m in messages if m["role"] == "system"]
    if system:
        params["system"] = "\n\n".join(system)
    params["messages"] = [m for m in messages if m["role"] != "system"]
    max_tokens = body.pop("max_tokens", None)
    if max_tokens is None:
        raise ValueError(f"model {spec.name!r}: Anthropic batches need max_tokens "
                         "(set it in default_params or the request)")
    params["max_tokens"] = max_tokens
    fmt = body.pop("response_format", None)
    if request.response_schema is not None and fmt is not None:
        params["output_config"] = {"format": {"type": "json_schema",
                                              "schema": request.response_schema}}
    if "stop" in body:
        stop = body.pop("stop")
        params["stop_sequences"] = [stop] if isinstance(stop, str) else stop
    # The Messages API has no seed (nor does Anthropic's OpenAI-compatible endpoint use one).
    # The seed stays in the call's key, so a writer's or a repeated judge's samples remain
    # distinct calls, each mapped back to its own row; only its wire request lacks it.
    body.pop("seed", None)
    unknown = sorted(set(body) - _PASSED)
    if unknown:
        raise ValueError(f"model {spec.name!r}: Anthropic batches take no "
                         f"{', '.join(unknown)} (parameters of the request)")
    params.update(body)
    return params


def completion_of(message: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic message as a chat.completion body."""
    blocks = message.get("content")
    text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict)
                   and b.get("type") == "text") if isinstance(blocks, list) else None
    usage = message.get("usage")
    read = anthropic_usage(usage) if isinstance(usage, dict) else None
    out: dict[str, Any] = {
        "model": message.get("model"),
        "choices": [{"message": {"role": "assistant", "content": text},
                     "finish_reason": _FINISH.get(str(message.get("stop_reason")), "stop")}]}
    if read is not None:  # a count that was not believable stays so (-1 is not a count)
        out["usage"] = {"prompt_tokens": -1 if read.input_tokens is None else read.input_tokens,
                        "completion_tokens": (-1 if read.output_tokens is None
                                              else read.output_tokens)}
        if read.cached_input_tokens is not None:
            out["usage"]["prompt_tokens_details"] = {"cached_tokens": read.cached_input_tokens}
    return out


def _line(row: dict[str, Any]) -> Line:
    cid, result = row["custom_id"], row.get("result")
    result = result if isinstance(result, dict) else {}
    kind = result.get("type")
    if kind == "succeeded" and isinstance(result.get("message"), dict):
        return Line(cid, payload=completion_of(result["message"]))
    if kind in ("canceled", "expired"):
        return Line(cid, kind=kind)
    outer = result.get("error")
    err = outer.get("error") if isinstance(outer, dict) else None
    err = err if isinstance(err, dict) else {}
    etype = str(err.get("type") or "api_error")
    return Line(cid, kind="errored", status=_STATUS.get(etype, 500), code=etype,
                error=f"{etype}: {err.get('message', '')}")


class AnthropicBatchApi:
    name = "anthropic"

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    async def _json(self, what: str, response: httpx.Response) -> dict[str, Any]:
        if response.status_code != 200:
            raise http_error(what, response)
        data = response.json()
        if not isinstance(data, dict):
            raise BatchApiError(f"{what}: not a JSON object", transient=True)
        return data

    async def create(self, spec: ModelSpec, items: Sequence[BatchItem], marker: str) -> str:
        requests = [{"custom_id": check_custom_id(item.custom_id),
                     "params": message_params(spec, item)} for item in items]
        batch = await self._json("create message batch", await self.http.post(
            "/messages/batches", json={"requests": requests}))
        return str(batch["id"])

    async def find(self, marker: str, n_items: int, since: datetime,
                   known: set[str]) -> str | None:
        """Message Batches keep no metadata: the newest unrecorded batch created since the
        submission was recorded, with as many requests. Certain only when nothing else
        creates batches under the same key meanwhile (a limit, said in docs/gateway.md)."""
        after: str | None = None
        floor = since - timedelta(seconds=120)  # clock skew between us and the provider
        for _ in range(20):
            params = {"limit": "100", **({"after_id": after} if after else {})}
            page = await self._json("list message batches", await self.http.get(
                "/messages/batches", params=params))
            for batch in page.get("data") or []:
                created = datetime.fromisoformat(str(batch.get("created_at")))
                if created < floor:
                    return None
                total = sum(v for v in (batch.get("request_counts") or {}).values()
                            if isinstance(v, int))
                if total == n_items and batch["id"] not in known:
                    return str(batch["id"])
            if not page.get("has_more"):
                return None
            after = page.get("last_id")
        return None

    async def state(self, batch_id: str) -> BatchState:
        batch = await self._json("message batch status", await self.http.get(
            f"/messages/batches/{batch_id}"))
        status = str(batch.get("processing_status"))
        return BatchState(status, status == "ended", None,
                          {"results_url": batch.get("results_url")})

    async def results(self, state: BatchState, batch_id: str) -> dict[str, Line]:
        response = await self.http.get(f"/messages/batches/{batch_id}/results")
        if response.status_code != 200:
            raise http_error("message batch results", response)
        lines: dict[str, Line] = {}
        for raw in response.content.decode().splitlines():
            row = json.loads(raw) if raw.strip() else None
            if isinstance(row, dict) and isinstance(row.get("custom_id"), str):
                lines[row["custom_id"]] = _line(row)
        return lines

    async def cancel(self, batch_id: str) -> None:
        await self._json("cancel message batch", await self.http.post(
            f"/messages/batches/{batch_id}/cancel"))
