"""One batch line answered as a direct chat call to the same model would be.

The reply (echo, template, script, rules, structured output from the schema) comes from the
same code as a direct call's (``ChatEndpoint._content`` and :func:`.protocol.completion_body`),
keyed by the same request-body hash, with the same usage block (cached input included,
:mod:`.usage`), so an OpenAI batch line gets the very completion a
direct call with that body gets. Fault rules apply too, with a fault's attempt number
counting the body's direct *and* batch arrivals (a ``first_attempts: 1`` rule fails a
batch line and lets its direct re-send through). What has no meaning without a connection
is mapped: ``hang`` is a line that timed out (OpenAI's line error ``request_timeout``);
``drop``, ``malformed_json`` and ``truncated_json`` are a 500 for the line. Model latency is
not applied: a batch's timing is the ``batch:`` scenario's.

Calls made here are counted in the batch counters only (per model, per body hash), never in
the direct-call totals.
"""

from __future__ import annotations

import json
from typing import Any

from essaybench.core.hashing import canonical_json, sha256_hex
from essaybench.llm.fake.app import ChatEndpoint, FakeState
from essaybench.llm.fake.batch_store import LineOutcome
from essaybench.llm.fake.protocol import (
    DEFAULT_CODE,
    completion_body,
    count_tokens,
    cut_to_tokens,
    error_response,
    parse_chat,
)
from essaybench.llm.fake.scenario import (
    DropFault,
    EmptyContentFault,
    FinishReasonFault,
    HangFault,
    MalformedJsonFault,
    StatusFault,
    TruncatedJsonFault,
)
from essaybench.llm.fake.usage import usage_fields


def _error(status: int, message: str | None = None, code: Any = DEFAULT_CODE) -> LineOutcome:
    """The line's response: the same error body a direct call gets."""
    return LineOutcome(status, json.loads(bytes(error_response(status, message, code).body)))


class BatchEngine:
    """Answers batch lines from the scenario's models; counts them as batch calls."""

    def __init__(self, state: FakeState) -> None:
        self.state = state
        self.chat = ChatEndpoint(state)

    def answer(self, body: Any) -> LineOutcome:
        st = self.state
        chat = parse_chat(body)
        if isinstance(chat, str):
            return _error(400, chat)
        cfg = st.scenario.model(chat.model)
        if cfg is None:
            return _error(404, f"The model `{chat.model}` does not exist.")
        wanted = chat.prompt_tokens + (chat.max_tokens or 0)
        if cfg.context_window is not None and wanted > cfg.context_window:
            return _error(400, f"This model's maximum context length is {cfg.context_window} "
                               f"tokens; you requested {wanted}.", "context_length_exceeded")
        key = sha256_hex(canonical_json(body))
        counters = st.batch_store.counters
        counters.keys[key] += 1
        counters.model_received[chat.model] += 1
        attempt = st.received.get(key, 0) + counters.keys[key]
        rule = st.match_fault(key, attempt, chat.model, chat.structured)
        if rule is not None:
            counters.faults[rule.kind] += 1
        if isinstance(rule, StatusFault):
            code = DEFAULT_CODE if rule.code is None else rule.code
            return _error(rule.status, rule.message, code)
        if isinstance(rule, HangFault):
            return LineOutcome(0, None, {"code": "request_timeout",
                                     "message": "The request to the model timed out."})
        if isinstance(rule, DropFault | MalformedJsonFault | TruncatedJsonFault):
            return _error(500)
        try:
            content = self.chat._content(cfg, chat, key, rule)
        except (ValueError, KeyError, TypeError) as exc:
            return _error(400, f"Unusable JSON schema: {exc}")
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
        if rule is None and finish == "stop":
            counters.model_completed[chat.model] += 1
        return LineOutcome(200, completion)
