"""What one chat-completion reply means for its call: the one reading shared by direct
calls (``llm.client``) and batch results (``llm.batch``).

A reply (a chat.completion body, or an Anthropic message put in that shape) ends its call
with a status, or asks for another attempt: an empty reply, or structured output that
fails its schema, is re-asked while the entry's ``max_reasks`` budget lasts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from essaybench.llm.registry import ModelSpec
from essaybench.llm.structured import (
    StructuredError,
    looks_like_refusal,
    parse_structured,
    reask_message,
)
from essaybench.llm.types import CallStatus, ChatRequest, Message

__all__ = ["Reading", "read_reply"]


@dataclass(frozen=True)
class Reading:
    """``status`` and the result's fields (text, parsed, error...); or ``status`` None: ask
    again with ``messages`` (one more re-ask)."""

    status: CallStatus | None
    fields: dict[str, Any] = field(default_factory=dict)
    messages: list[Message] | None = None


def read_reply(spec: ModelSpec, request: ChatRequest, payload: dict[str, Any],
               messages: Sequence[Message], reasks: int) -> Reading:
    """Read ``payload`` (``choices[0].message`` is an object) after ``reasks`` re-asks."""
    choice = payload["choices"][0]
    text = choice["message"].get("content")
    finish_reason = choice.get("finish_reason")
    common: dict[str, Any] = {"returned_model": payload.get("model"),
                              "finish_reason": finish_reason, "text": text}
    if finish_reason == "content_filter":
        return Reading(CallStatus.REFUSED, {**common, "error_kind": "content_filter",
                       "error": "the provider's content filter stopped the reply"})
    if finish_reason == "length":
        max_tokens = spec.effective_params(request.params).get("max_tokens")
        return Reading(CallStatus.TRUNCATED, {**common, "error_kind": "length",
                       "error": f"reply hit max_tokens={max_tokens}"})
    if not text or not text.strip():
        if reasks < spec.max_reasks:
            return Reading(None, common, list(messages))
        return Reading(CallStatus.API_ERROR, {**common, "error_kind": "empty_content",
                       "error": f"empty reply {reasks + 1} times"})
    if request.response_schema is None:
        return Reading(CallStatus.OK, common)
    try:
        parsed = parse_structured(text, request.response_schema)
    except StructuredError as exc:
        if looks_like_refusal(text):
            return Reading(CallStatus.REFUSED, {**common, "error_kind": "refusal",
                           "error": f"the model declined: {text.strip()[:200]!r}"})
        if reasks < spec.max_reasks:
            return Reading(None, common, [*messages, Message(role="assistant", content=text),
                                          Message(role="user", content=reask_message(str(exc)))])
        return Reading(CallStatus.PARSE_ERROR, {**common, "error_kind": "schema",
                       "error": f"{exc} (after {reasks} re-asks)"})
    return Reading(CallStatus.OK, {**common, "parsed": parsed})
