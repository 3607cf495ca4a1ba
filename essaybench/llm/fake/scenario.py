"""What the fake OpenAI-compatible server does: models, replies, latency and injected faults.

A scenario is data (YAML or JSON, or built in Python). Example::

    api_key_env: FAKE_OPENAI_KEY        # require "Authorization: Bearer <that value>"
    models:
      gpt-x:
        returned_model: gpt-x-2025-01-01
        latency_ms: {mean: 200, jitter: 50, seed: 7}
        reply: template
        template: "第{n}篇（{model}）：{prompt}"
      judge-a:
        rules:                          # first match on the first user message wins
          - {contains: ["【甲】", "论点"], reply: '{"scores": {"q1": 7}}'}
        reply: script
        script: ["甲", "乙"]
        structured: schema              # json_schema requests get a valid generated object
    capacity: 4                         # at most 4 requests served at once; more queue
    faults:                             # first matching rule wins
      - {kind: status, status: 429, retry_after: 1, first_attempts: 1, models: [gpt-x]}
      - {kind: drop, rate: 0.01, seed: 3}
      - {kind: status, status: 401, echo_key: true, models: [judge-a]}  # key in the body

Every decision is a pure function of the request body hash, the attempt number
(how many times that exact body has arrived since the last reset) and seeds,
except ``every_nth`` and the ``{n}``/script order, which follow arrival order.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from essaybench.core.hashing import sha256_hex
from essaybench.core.yamlio import load_model
from essaybench.llm.fake.batch_scenario import BatchScenario

WILDCARD = "*"  # a model entry under this name answers for any unlisted model


def unit_hash(*parts: object) -> float:
    """A uniform number in [0, 1) from the parts: reproducible 'randomness' without state."""
    digest = sha256_hex(":".join(str(p) for p in parts))
    return int(digest[:13], 16) / float(16**13)


class Latency(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    mean: float = Field(default=0.0, ge=0, description="Mean latency in milliseconds.")
    jitter: float = Field(default=0.0, ge=0, description="Uniform spread ± this many milliseconds.")
    seed: int = Field(default=0, description="Seed of the per-request jitter draw.")


class ReplyRule(BaseModel):
    """A fixed reply for requests whose first user message contains every string given.

    Matching the first user message (not the last) keeps a rule's answer the same when
    the client re-asks, so a scripted bad reply stays bad through the re-ask budget.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    contains: tuple[str, ...] = Field(min_length=1, description="All must appear.")
    reply: str = Field(description="The content returned, for plain and structured requests.")
    echo_constants: bool = Field(
        default=False, description="The reply is a JSON object: fill in every top-level "
        "field the request's schema fixes to one value (an enum of one, e.g. a nonce), as "
        "a judge that follows the schema and an injection at once would.")

    def matches(self, first_prompt: str) -> bool:
        return all(part in first_prompt for part in self.contains)

    def content(self, schema: dict[str, Any] | None) -> str:
        if not self.echo_constants or not schema:
            return self.reply
        fixed = {k: v["enum"][0] for k, v in (schema.get("properties") or {}).items()
                 if isinstance(v, dict) and len(v.get("enum") or ()) == 1}
        return json.dumps({**fixed, **json.loads(self.reply)}, ensure_ascii=False)


class ModelScenario(BaseModel):
    """How one model name answers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    returned_model: str | None = Field(
        default=None, description="Model id put in responses (default: the requested name).")
    latency_ms: float | Latency = Field(
        default=0.0,
        description="Delay before a 200 reply: fixed milliseconds, or {mean, jitter, seed}.")
    reply: Literal["echo", "template", "script"] = Field(
        default="echo", description="echo: the last user message verbatim; template; script.")
    template: str | None = Field(
        default=None, description="Python format string with {prompt}, {n}, {model}, {key}.")
    script: tuple[str, ...] = Field(
        default=(), description="Replies handed out in order, one per distinct request, cycling.")
    structured: Literal["schema", "script", "reply"] = Field(
        default="schema", description="Structured requests: generate from the schema, use "
                              "structured_script, or answer like a plain request.")
    structured_script: tuple[str, ...] = Field(
        default=(),
        description="Raw reply strings for structured requests, cycling per distinct request.")
    rules: tuple[ReplyRule, ...] = Field(
        default=(), description="Content-matched replies, tried first; the first match wins.")
    enforce_max_tokens: bool = Field(
        default=True, description="Cut replies longer than max_tokens and finish with 'length'.")
    context_window: int | None = Field(
        default=None, ge=1,
        description="prompt + max_tokens above this → 400 context_length_exceeded.")
    cache_report: Literal["none", "openai", "deepseek"] = Field(
        default="none", description="How the usage block reports cached input (fake/usage.py): "
        "none (no field, as many compatible servers), openai "
        "(prompt_tokens_details.cached_tokens), deepseek (prompt_cache_hit/miss_tokens).")
    cached_prefix: Literal["system"] | int = Field(
        default="system", description="The cached input reported: 'system' = the tokens of "
        "the leading system messages (a warm prompt cache), or a fixed count (at most the "
        "prompt's tokens).")
    usage_extra: dict[str, Any] = Field(
        default_factory=dict, description="Fields merged into the usage block as given "
        "(tests of untrusted usage fields).")

    @model_validator(mode="after")
    def _check_mode(self) -> ModelScenario:
        if self.reply == "template":
            if self.template is None:
                raise ValueError("reply 'template' needs a template")
            try:
                self.template.format(prompt="", n=1, model="", key="")
            except (KeyError, IndexError, ValueError) as exc:
                raise ValueError(f"template may use only {{prompt}} {{n}} {{model}} {{key}}: "
                                 f"{exc!r}") from exc
        if self.reply == "script" and not self.script:
            raise ValueError("reply 'script' needs a non-empty script")
        if self.structured == "script" and not self.structured_script:
            raise ValueError("structured 'script' needs a non-empty structured_script")
        if isinstance(self.cached_prefix, int) and self.cached_prefix < 0:
            raise ValueError("cached_prefix must be 'system' or a count >= 0")
        return self

    def latency_s(self, key: str, attempt: int) -> float:
        if isinstance(self.latency_ms, Latency):
            lat = self.latency_ms
            u = unit_hash("latency", key, attempt, lat.seed)
            return max(0.0, lat.mean + (2 * u - 1) * lat.jitter) / 1000.0
        return self.latency_ms / 1000.0


class _Rule(BaseModel):
    """When a fault applies. All conditions given must hold; none given means always."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    structured_only: ClassVar[bool] = False

    first_attempts: int | None = Field(
        default=None, ge=1, description="Applies to the first N arrivals of the same request body.")
    rate: float | None = Field(
        default=None, ge=0, le=1, description="Applies when hash(body, attempt, seed) < rate.")
    seed: int = Field(default=0, description="Seed of the rate decision.")
    every_nth: int | None = Field(
        default=None, ge=1, description="Applies to every n-th request this rule is eligible for.")
    models: tuple[str, ...] | None = Field(
        default=None, description="Only requests for these model names (default: all).")

    def eligible(self, model: str, structured: bool) -> bool:
        if self.models is not None and model not in self.models:
            return False
        return structured or not self.structured_only

    def applies(self, key: str, attempt: int, nth: int) -> bool:
        """``attempt``: 1-based arrivals of this body; ``nth``: 1-based eligible requests."""
        if self.first_attempts is not None and attempt > self.first_attempts:
            return False
        if self.rate is not None and unit_hash("fault", key, attempt, self.seed) >= self.rate:
            return False
        return self.every_nth is None or nth % self.every_nth == 0


class StatusFault(_Rule):
    """An HTTP error in the OpenAI error shape, sent at once."""

    kind: Literal["status"] = "status"
    status: Literal[400, 401, 403, 404, 408, 429, 500, 502, 503, 504] = Field(
        default=500, description="HTTP status code.")
    retry_after: float | None = Field(
        default=None, ge=0, description="Seconds for the Retry-After header (also retry-after-ms).")
    code: str | None = Field(
        default=None, description="error.code, e.g. context_length_exceeded (default: per status).")
    message: str | None = Field(default=None, description="error.message (default: per status).")
    echo_key: bool = Field(
        default=False,
        description="Put the presented bearer key in error.message, as a real provider's 401 "
                    "does: 'Incorrect API key provided: <key>' (tests redaction).")

    def message_for(self, presented_key: str | None) -> str | None:
        """error.message, with the key the request presented when ``echo_key``."""
        if not self.echo_key:
            return self.message
        return f"{self.message or 'Incorrect API key provided:'} {presented_key or '(none)'}"


class HangFault(_Rule):
    """Read the request, then say nothing for ``seconds`` and close the connection."""

    kind: Literal["hang"] = "hang"
    seconds: float = Field(default=30.0, gt=0,
                           description="Silence before closing; longer than the client timeout.")


class DropFault(_Rule):
    """Kill the connection after reading the request, with no HTTP response at all."""

    kind: Literal["drop"] = "drop"
    how: Literal["reset", "close"] = Field(
        default="reset", description="reset: TCP RST (client: read error); close: FIN (client: "
                             "'server disconnected without sending a response').")


class MalformedJsonFault(_Rule):
    kind: Literal["malformed_json"] = "malformed_json"
    body: str = Field(default="<html><body>upstream error</body></html>",
                      description="The non-JSON body sent with status 200.")


class TruncatedJsonFault(_Rule):
    kind: Literal["truncated_json"] = "truncated_json"
    fraction: float = Field(default=0.5, gt=0, lt=1,
                            description="Share of the JSON body that is sent.")


class EmptyContentFault(_Rule):
    kind: Literal["empty_content"] = "empty_content"


class FinishReasonFault(_Rule):
    kind: Literal["finish_reason"] = "finish_reason"
    finish_reason: Literal["content_filter", "length"] = Field(
        default="length", description="The finish_reason reported.")
    content: Literal["partial", "empty"] = Field(
        default="partial", description="partial: the first half of the normal reply; empty: ''.")


class InvalidStructuredFault(_Rule):
    """Structured requests only: a 200 whose content breaks the schema, or is not JSON."""

    structured_only: ClassVar[bool] = True
    kind: Literal["invalid_structured"] = "invalid_structured"
    variant: Literal["schema_violation", "not_json"] = Field(
        default="schema_violation", description="JSON that violates the schema, or prose.")


FaultRule = Annotated[
    StatusFault | HangFault | DropFault | MalformedJsonFault | TruncatedJsonFault
    | EmptyContentFault | FinishReasonFault | InvalidStructuredFault,
    Field(discriminator="kind"),
]


class FakeScenario(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    models: dict[str, ModelScenario] = Field(
        default_factory=lambda: {WILDCARD: ModelScenario()},
        description="Per model name; '*' answers for unlisted names (else 404).")
    faults: tuple[FaultRule, ...] = Field(default=(),
                                          description="Fault rules; the first match wins.")
    api_key: SecretStr | None = Field(
        default=None, description="Require this bearer key (prefer api_key_env outside tests).")
    api_key_env: str | None = Field(
        default=None, description="Require the bearer key held in this environment variable.")
    seed: int = Field(default=0, description="Seed mixed into generated structured replies.")
    capacity: int | None = Field(
        default=None, ge=1, description="Chat requests served at once, over all models (a "
        "self-hosted server's batch slots); more wait in arrival order, and a request's "
        "latency runs from when it is taken, so waiting adds to it. null: no limit (each "
        "request's latency runs from its arrival).")
    honour_idempotency_key: bool = Field(
        default=False, description="Answer a request whose Idempotency-Key was answered "
        "cleanly before from the record, uncharged (fake/idempotency.py); off, as OpenAI's "
        "chat completions ignore the header.")
    batch: BatchScenario = Field(
        default_factory=BatchScenario,
        description="The batch APIs' timing, partial failure and expiry (fake/batch_scenario.py).")

    def model(self, name: str) -> ModelScenario | None:
        return self.models.get(name) or self.models.get(WILDCARD)

    def expected_api_key(self) -> str | None:
        """The key requests must carry, or None when the scenario needs none."""
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        if self.api_key_env is not None:
            value = os.environ.get(self.api_key_env)
            if not value:
                raise ValueError(f"scenario requires a key in ${self.api_key_env}, which is unset")
            return value
        return None

    @classmethod
    def from_file(cls, path: str | Path) -> FakeScenario:
        """Load from .yaml/.yml or .json; an error names the file (a ``ValueError``)."""
        return load_model(cls, path, "fake scenario")
