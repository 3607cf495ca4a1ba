"""Records that cross the gateway's boundary: a chat request and its result."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidatorFunctionWrapHandler, field_validator

from essaybench.core.hashing import SharedJson, canonical_json, sha256_hex

__all__ = [
    "SHARED_JSON",
    "CallStatus",
    "ChatRequest",
    "ChatResult",
    "Message",
    "Usage",
    "key_of",
]


class CallStatus(StrEnum):
    """The outcome of one logical call (after its retries and re-asks)."""

    OK = "ok"
    PARSE_ERROR = "parse_error"  # a reply came, but never matched the schema within the budget
    API_ERROR = "api_error"  # non-transient HTTP error, or transient ones past the retry budget
    REFUSED = "refused"  # content filter or an explicit refusal
    TRUNCATED = "truncated"  # finish_reason "length": the reply hit max_tokens
    SKIPPED = "skipped"  # not sent (e.g. over budget, or its input was missing)


# Encodings of answer schemas (one object per genre, shared by thousands of requests).
SHARED_JSON = SharedJson()


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


class ChatRequest(BaseModel):
    """One logical call. Its identity (``key``) is a hash of what the provider sees."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(description="Model name in the registry.")
    messages: tuple[Message, ...] = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict,
                                   description="temperature, max_tokens, top_p, seed, ...")
    response_schema: dict[str, Any] | None = Field(
        default=None, description="JSON schema the reply must satisfy (structured output).")
    sample_index: int = Field(default=0, ge=0, description="Distinguishes repeated samples.")
    stage: str = Field(default="", description="Pipeline stage (accounting; not keyed).")
    tag: str = Field(default="", description="Caller's label, e.g. prompt id (not keyed).")

    @field_validator("response_schema", mode="wrap")
    @classmethod
    def _same_schema_object(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        # A dict is kept as given, not copied: requests built from one schema share it,
        # and its JSON text is encoded once for all of them (SHARED_JSON).
        return value if type(value) is dict else handler(value)

    def canonical(self, endpoint: str, model_id: str, effective_params: dict[str, Any]) -> str:
        """The canonical JSON of what the provider sees: endpoint, model id, messages,
        params, schema and sample. ``key`` hashes it; the ledger stores it as the request,
        so a stored call can be checked against its key.

        Equal to ``canonical_json`` of that dict (sorted keys, compact), assembled field
        by field so that the answer schema, shared by many calls, is encoded once."""
        schema = ("null" if self.response_schema is None else
                  SHARED_JSON.text(self.response_schema, "canonical", canonical_json))
        return ('{"endpoint":' + canonical_json(endpoint.rstrip("/"))
                + ',"messages":' + canonical_json([{"content": m.content, "role": m.role}
                                                    for m in self.messages])
                + ',"model_id":' + canonical_json(model_id)
                + ',"params":' + canonical_json(effective_params)
                + ',"sample_index":' + canonical_json(self.sample_index)
                + ',"schema":' + schema + "}")

    def key(self, endpoint: str, model_id: str, effective_params: dict[str, Any]) -> str:
        """Hash of the canonical request (see ``canonical``)."""
        return key_of(self.canonical(endpoint, model_id, effective_params))


def key_of(canonical: str) -> str:
    """A request's key: the first 32 hex digits of the SHA-256 of its canonical JSON."""
    return sha256_hex(canonical)[:32]


@dataclass(frozen=True)
class Usage:
    input_tokens: int | None = None  # every input token, cached ones included
    output_tokens: int | None = None
    # Of the input, served from the provider's prompt cache (None: not reported).
    cached_input_tokens: int | None = None


@dataclass(frozen=True)
class ChatResult:
    """What happened to one logical call. Every call ends with exactly one of these."""

    key: str
    model: str  # registry name
    status: CallStatus
    text: str | None = None  # raw reply text (also kept for parse errors)
    parsed: Any = None  # validated JSON for structured calls
    returned_model: str | None = None  # the model id the API says it used
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0  # wall time of the successful (or last) attempt
    cost_usd: float | None = None
    attempts: int = 0  # HTTP requests sent for this call: 1 + retries + reasks
    # Of those, re-sent after a transient transport failure (429, 5xx, timeouts, ...), and
    # sent again because the reply was empty or broke the answer format (a re-ask). None:
    # not recorded (a ledger row written before the two were counted apart).
    retries: int | None = 0
    reasks: int | None = 0
    error_kind: str | None = None  # e.g. http_429, timeout, connect, context_length, schema
    error: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    from_ledger: bool = False  # served from the ledger without a request
    # Answered through a provider's batch API (llm.batch; its re-asks may have gone direct).
    batched: bool = False
    stage: str = ""
    tag: str = ""

    @property
    def ok(self) -> bool:
        return self.status is CallStatus.OK
