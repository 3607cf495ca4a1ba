"""One batch result line as the call's result: read as a direct reply is (``llm.reply``),
priced at the batch price, or set aside to be sent again (expired, cancelled, transient)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from essaybench.llm.batch.wire import ERROR_TEXT_LIMIT, Line
from essaybench.llm.registry import ModelSpec
from essaybench.llm.reply import read_reply
from essaybench.llm.retry import classify_http_error
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message, Usage
from essaybench.llm.usage import openai_usage

__all__ = ["Again", "Reask", "combine", "result_of_line"]


@dataclass(frozen=True)
class Again:
    """Not answered: to be sent again (or failed) by the on_expired policy."""

    error_kind: str  # batch_expired, batch_cancelled, batch_failed, http_500, ...
    error: str


@dataclass(frozen=True)
class Reask:
    """Answered, but the reply asks for a re-ask: ``first`` is what the batch line cost; the
    call goes on as a direct call with ``messages``."""

    first: ChatResult
    messages: list[Message]


def usage_of(payload: dict[str, Any]) -> tuple[Usage, bool]:
    """The reply's usage and whether it had a usage block (the client's rule, one attempt)."""
    usage = payload.get("usage")
    if not usage or not isinstance(usage, dict):
        return Usage(), False
    read = openai_usage(usage)
    if read.input_tokens is None or read.output_tokens is None:
        return Usage(), True
    return Usage(read.input_tokens, read.output_tokens, read.cached_input_tokens), True


def result_of_line(spec: ModelSpec, key: str, request: ChatRequest, line: Line | None,
                   started_at: datetime, finished_at: datetime) -> ChatResult | Again | Reask:
    common: dict[str, Any] = {"key": key, "model": spec.name, "attempts": 1, "retries": 0,
                              "reasks": 0, "started_at": started_at, "finished_at": finished_at,
                              "latency_s": (finished_at - started_at).total_seconds(),
                              "stage": request.stage, "tag": request.tag, "batched": True}
    if line is None:
        return Again("batch_missing", "the batch's results had no line for this call")
    if line.kind == "expired":
        return Again("batch_expired", "the batch's completion window ended first")
    if line.kind == "canceled":
        return Again("batch_cancelled", "the batch was cancelled first")
    if line.payload is None:
        message = (line.error or "")[:ERROR_TEXT_LIMIT]
        if not line.status:  # no response at all (the line timed out)
            return Again(line.code or "batch_line_failed", message)
        transient, kind = classify_http_error(line.status, line.code, message)
        if transient:
            return Again(kind, message)
        status = CallStatus.REFUSED if kind == "content_filter" else CallStatus.API_ERROR
        return ChatResult(status=status, error_kind=kind, error=message, **common)
    usage, reported = usage_of(line.payload)
    cost = (spec.cost_usd(usage.input_tokens, usage.output_tokens, usage.cached_input_tokens,
                          batch=True, finished_at=finished_at) if reported else None)
    reading = read_reply(spec, request, line.payload, request.messages, 0)
    if reading.status is None:
        assert reading.messages is not None
        first = ChatResult(status=CallStatus.API_ERROR, usage=usage, cost_usd=cost,
                           text=reading.fields.get("text"), **common)
        return Reask(first, reading.messages)
    return ChatResult(status=reading.status, usage=usage, cost_usd=cost, **common,
                      **reading.fields)


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def combine(first: ChatResult, rest: ChatResult) -> ChatResult:
    """A call whose first attempt was a batch line and whose re-asks went direct."""
    cost = (None if first.cost_usd is None or rest.cost_usd is None
            else first.cost_usd + rest.cost_usd)
    usage = Usage(_add(first.usage.input_tokens, rest.usage.input_tokens),
                  _add(first.usage.output_tokens, rest.usage.output_tokens),
                  _add(first.usage.cached_input_tokens, rest.usage.cached_input_tokens))
    reasks = 1 + (rest.reasks or 0)
    error = rest.error
    if error is not None and rest.error_kind == "schema":  # the count of the whole call
        error = error.replace(f"(after {rest.reasks} re-asks)", f"(after {reasks} re-asks)")
    return dataclasses.replace(
        rest, key=first.key, error=error, usage=usage, cost_usd=cost,
        attempts=first.attempts + rest.attempts, reasks=reasks, started_at=first.started_at,
        latency_s=first.latency_s + rest.latency_s, stage=first.stage, tag=first.tag,
        batched=True)
