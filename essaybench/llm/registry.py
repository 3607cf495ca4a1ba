"""The model registry: every endpoint the gateway may call, validated from YAML.

A registry entry names an OpenAI-compatible endpoint (or the embedded local
model), the model id sent to it, its limits and prices. Secrets never live
here: an entry holds only the NAME of the environment variable with its key,
and ``ModelSpec.api_key()`` reads that variable at call time. Nothing a spec
can print, dump or raise contains a key, and every validation error is built
without echoing the offending value (``hide_input_in_errors``), because the
commonest mistake is pasting the key itself where its variable name belongs.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from essaybench.core.errors import UnknownNameError, UserError
from essaybench.core.paths import resource
from essaybench.core.project import project_or_error
from essaybench.core.redact import register_secret_envs
from essaybench.core.yamlio import YamlConfigError, YamlDocument, read_yaml
from essaybench.llm.pricing import OffPeak, call_cost
from essaybench.llm.types import SHARED_JSON, Message

__all__ = [
    "EMBEDDED",
    "MODELS_ENV",
    "ApiKeyMissingError",
    "BatchProtocol",
    "JudgeClashError",
    "ModelSpec",
    "Registry",
    "RegistryError",
    "StructuredOutput",
    "check_judges",
    "check_params",
    "default_models_path",
    "load_registry",
    "request_identity",
]

EMBEDDED = "embedded"  # base_url of the model the project runs itself (llama.cpp)
MODELS_ENV = "ESSAYBENCH_MODELS"  # overrides the default registry path

StructuredOutput = Literal["json_schema", "json_object", "none"]
BatchProtocol = Literal["openai", "anthropic", "none"]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_FAMILY_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
# Upper-case identifiers only: real keys are mixed-case or carry "-" / ".", so
# this also rejects the key pasted in place of its variable's name.
_ENV_NAME_RE = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_MAX_ENV_NAME = 64
_MAX_ENV_SEGMENT = 24  # an upper-case hex key is one long run without "_"
# Set by request_body itself: a config or a caller setting them would be silently overridden.
_RESERVED_PARAMS = frozenset({"model", "messages", "response_format", "stream"})
_CREDENTIAL_PARAMS = frozenset({"api_key", "apikey", "key", "authorization", "secret",
                                "password", "token", "access_token", "headers", "extra_headers"})
_SCHEMA_NAME_RE = re.compile(r"[^A-Za-z0-9_-]")


class RegistryError(YamlConfigError):
    """The registry file is wrong: the message names the file and the entry, never a value."""


class ApiKeyMissingError(UserError, RuntimeError):
    """The environment variable a model's key should come from is unset or empty."""


def check_params(params: Mapping[str, Any], where: str) -> None:
    """Reject parameters the body builder owns, credentials, and out-of-range sampling values."""
    for key, value in params.items():
        if key in _RESERVED_PARAMS:
            raise ValueError(f"{where}: {key!r} is set by the gateway, not by parameters")
        if key.lower() in _CREDENTIAL_PARAMS:
            raise ValueError(f"{where}: {key!r} looks like a credential; keys come only from "
                             "the environment variable named by api_key_env")
        if value is None:
            continue
        if key == "temperature" and not (isinstance(value, int | float) and 0 <= value <= 2):
            raise ValueError(f"{where}: temperature must be a number in [0, 2]")
        if key == "top_p" and not (isinstance(value, int | float) and 0 < value <= 1):
            raise ValueError(f"{where}: top_p must be a number in (0, 1]")
        if key in ("max_tokens", "max_completion_tokens") and not (
                isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            raise ValueError(f"{where}: {key} must be a positive integer")


class ModelSpec(BaseModel):
    """One callable model: where it lives, what is sent as "model", its limits and prices."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    name: str = Field(description="Registry key; the name every record and table uses.")
    provider: str = Field(min_length=1, description="Provider label, e.g. openai, deepseek.")
    base_url: str = Field(description="OpenAI-compatible base URL (…/v1), or 'embedded'.")
    protocol: str = Field(
        default="openai", description="The backend class that sends this entry's calls, by "
        "its registered name (llm.backends): openai (chat completions, the default), or "
        "one a plugin registers.")
    api_key_env: str | None = Field(
        default=None, description="NAME of the env variable holding the key; null = keyless.")
    model_id: str = Field(min_length=1, description="Sent as the request's 'model'.")
    family: str = Field(description="Model family (openai, deepseek, qwen…), for self-preference.")
    default_params: dict[str, Any] = Field(
        default_factory=dict, description="temperature, max_tokens, top_p…; per-call values win.")
    structured_output: StructuredOutput = Field(
        default="none", description="How a schema is requested: json_schema|json_object|none.")
    max_concurrency: int = Field(default=4, ge=1, description="Requests in flight at once.")
    rpm: int | None = Field(
        default=None, ge=1, description="Requests per minute; null = unlimited.")
    tpm: int | None = Field(
        default=None, ge=1, description="Tokens per minute; null = unlimited.")
    price_input_per_mtok: float | None = Field(
        default=None, ge=0, description="USD per million input tokens; null = unknown.")
    price_output_per_mtok: float | None = Field(
        default=None, ge=0, description="USD per million output tokens; null = unknown.")
    price_cached_input_per_mtok: float | None = Field(
        default=None, ge=0, description="USD per million input tokens the provider served "
        "from its prompt cache (its usage block says how many); null = billed at the input "
        "price (llm.pricing).")
    batch_price_factor: float | None = Field(
        default=None, gt=0, le=1, description="Price multiplier, 0 < f <= 1, of a call sent "
        "through the provider's batch API (0.5 = half price); null = 1.")
    batch: BatchProtocol = Field(
        default="none", description="The provider's batch API this entry's calls may go "
        "through (llm.batch): openai (Batch API, /v1/batches), anthropic (Message Batches) "
        "or none.")
    off_peak: tuple[OffPeak, ...] = Field(
        default=(), description="Discounted periods: {start, end (\"HH:MM\" UTC), "
        "price_factor, days}; the first whose window holds the moment a call finished "
        "multiplies its cost (llm.pricing). One mapping or a list.")
    timeout_s: float = Field(
        default=180.0, gt=0, description="Read timeout of one request, seconds.")
    connect_timeout_s: float = Field(default=10.0, gt=0, description="Connect timeout, seconds.")
    max_retries: int = Field(
        default=4, ge=0, description="Retries of transient failures per call.")
    max_reasks: int = Field(
        default=2, ge=0, description="Re-asks after a reply that fails the schema.")
    enabled: bool = Field(default=True, description="Whether runs use this model by default.")
    idempotency_key: bool = Field(
        default=True, description="Send an Idempotency-Key header naming the run, the call "
        "and its re-ask: a provider or gateway that honours it answers a call re-sent after a "
        "crash (a shard sent again) from its record instead of charging it twice. Set false "
        "for an endpoint that stores failures under the key (a retry would get the failure).")
    writer_system_prompt: str | None = Field(
        default=None, min_length=1, description="A writer configuration's system message: "
        "sent first on this entry's essay-writing requests (never on its judge calls); "
        "it takes the place of the run's generate.system_prompt.")

    @field_validator("off_peak", mode="before")
    @classmethod
    def _one_or_more_periods(cls, v: Any) -> Any:
        return [v] if isinstance(v, dict) else v

    @model_validator(mode="after")
    def _check_prices(self) -> ModelSpec:
        pin, pcached = self.price_input_per_mtok, self.price_cached_input_per_mtok
        if pcached is not None and (pin is None or pcached > pin):
            raise ValueError("price_cached_input_per_mtok needs price_input_per_mtok and must "
                             "not exceed it (cached input is the discounted part)")
        return self

    @field_validator("name")
    @classmethod
    def _check_name(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError("name must be 1-64 characters of letters, digits, '.', '_', '-'")
        return v

    @field_validator("protocol")
    @classmethod
    def _check_protocol(cls, v: str) -> str:
        from essaybench.llm.protocols import is_known_protocol, known_protocols

        if not is_known_protocol(v):
            raise ValueError(f"unknown protocol {v!r}; known: {', '.join(known_protocols())}")
        return v

    @field_validator("family")
    @classmethod
    def _check_family(cls, v: str) -> str:
        if not _FAMILY_RE.match(v):
            raise ValueError("family must be a short lower-case label such as 'qwen'")
        return v

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, v: str) -> str:
        if v == EMBEDDED:
            return v
        parts = urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("base_url must be an http(s) URL with a host, or 'embedded'")
        # A key smuggled into the URL would end up in every stored record.
        if parts.username or parts.password or parts.query or parts.fragment:
            raise ValueError("base_url must not carry credentials, a query or a fragment; "
                             "keys come only from the variable named by api_key_env")
        try:
            parts.port  # noqa: B018 - raises on a malformed port
        except ValueError:
            raise ValueError("base_url has an invalid port") from None
        return v.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _check_api_key_env(cls, v: str | None) -> str | None:
        if v is None:
            return v
        # Never echo v: when this fails it is most likely the key itself.
        if (len(v) > _MAX_ENV_NAME or not _ENV_NAME_RE.match(v)
                or any(len(seg) > _MAX_ENV_SEGMENT for seg in v.split("_"))):
            raise ValueError(
                f"api_key_env must be the NAME of an environment variable, such as "
                f"DEEPSEEK_API_KEY (upper-case letters, digits, '_'), not the key; the value "
                f"given ({len(v)} characters) is not shown")
        return v

    @field_validator("default_params")
    @classmethod
    def _check_default_params(cls, v: dict[str, Any]) -> dict[str, Any]:
        check_params(v, "default_params")
        return v

    @property
    def is_embedded(self) -> bool:
        return self.base_url == EMBEDDED

    @property
    def endpoint(self) -> str:
        """The endpoint identity hashed into request keys: the configured URL, or 'embedded'."""
        return self.base_url

    def api_key(self) -> str | None:
        """The key from the environment, read now; None for keyless endpoints."""
        if self.api_key_env is None:
            return None
        value = os.environ.get(self.api_key_env, "").strip()
        if not value:
            raise ApiKeyMissingError(
                f"model {self.name!r} needs an API key: set the environment variable "
                f"{self.api_key_env}")
        return value

    def with_base_url(self, base_url: str) -> ModelSpec:
        """A validated copy pointing elsewhere (a test server, the started embedded server)."""
        return ModelSpec.model_validate({**self.model_dump(), "base_url": base_url})

    def effective_params(self, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """default_params overlaid with per-call params; a per-call None removes a default."""
        call = dict(params or {})
        check_params(call, f"parameters for model {self.name!r}")
        merged = {**self.default_params, **call}
        return {k: merged[k] for k in sorted(merged) if merged[k] is not None}

    def response_format(self, schema: Mapping[str, Any]) -> dict[str, Any] | None:
        """The response_format field for this endpoint's structured-output style."""
        if self.structured_output == "json_schema":
            return {"type": "json_schema",
                    "json_schema": {"name": _schema_name(schema), "schema": dict(schema),
                                    "strict": True}}
        if self.structured_output == "json_object":
            return {"type": "json_object", "schema": dict(schema)}
        return None  # "none": the prompt alone asks for JSON

    def request_body(self, messages: Sequence[Message], params: Mapping[str, Any] | None = None,
                     schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The OpenAI chat-completions body (no stream, no credentials)."""
        if not messages:
            raise ValueError("a chat request needs at least one message")
        body: dict[str, Any] = {
            "model": self.model_id,
            "messages": [m.model_dump() for m in messages],
            **self.effective_params(params),
        }
        if schema is not None:
            fmt = self.response_format(schema)
            if fmt is not None:
                body["response_format"] = fmt
        return body

    def request_json(self, messages: Sequence[Message], params: Mapping[str, Any] | None = None,
                     schema: Mapping[str, Any] | None = None) -> bytes:
        """``request_body`` as sent: compact UTF-8 JSON, keys in the body's order. The
        response_format text is encoded once per schema object (``SHARED_JSON``), not
        once per call."""
        text = _compact_json(self.request_body(messages, params))
        if schema is not None and self.structured_output != "none":
            fmt = SHARED_JSON.text(schema, ("response_format", self.structured_output),
                                   lambda s: _compact_json(self.response_format(s)))
            text = text[:-1] + ',"response_format":' + fmt + "}"
        return text.encode()

    def cost_usd(self, input_tokens: int | None, output_tokens: int | None,
                 cached_input_tokens: int | None = None, *, batch: bool = False,
                 finished_at: datetime | None = None) -> float | None:
        """What a call cost (``llm.pricing.call_cost``: cached input, batch and off-peak
        prices); None when a price or a token count is unknown (never a guess)."""
        return call_cost(self, input_tokens, output_tokens, cached_input_tokens,
                         batch=batch, finished_at=finished_at)

    def describe(self) -> dict[str, Any]:
        """JSON-safe facts stored with every record: identity and parameters, no secrets."""
        return {
            "name": self.name, "provider": self.provider, "endpoint": self.endpoint,
            "model_id": self.model_id, "family": self.family,
            "default_params": dict(sorted(self.default_params.items())),
            "structured_output": self.structured_output,
            "api_key_env": self.api_key_env,
            "price_input_per_mtok": self.price_input_per_mtok,
            "price_output_per_mtok": self.price_output_per_mtok,
            "price_cached_input_per_mtok": self.price_cached_input_per_mtok,
            "batch_price_factor": self.batch_price_factor,
            "off_peak": [p.model_dump() for p in self.off_peak],
            "writer_system_prompt": self.writer_system_prompt,
        }


def request_identity(spec: ModelSpec) -> tuple[str, str, str]:
    """What a request key hashes of an entry (besides the messages and per-call params)."""
    return (spec.endpoint.rstrip("/"), spec.model_id, json.dumps(spec.effective_params(),
                                                                 sort_keys=True))


class JudgeClashError(UserError, ValueError):
    """Two judges of one run would send identical requests."""


def check_judges(registry: Registry, judges: Sequence[str]) -> None:
    """Refuse two judges that would send identical judge requests: entries that differ at
    most in ``writer_system_prompt`` (judge calls never carry it) cannot be told apart
    in the ledger, so one run cannot use both as judges."""
    seen: dict[tuple[str, str, str], str] = {}
    for name in dict.fromkeys(judges):
        spec = registry.get(name)
        ident = request_identity(spec)
        if ident in seen:
            raise JudgeClashError(
                f"judges {seen[ident]!r} and {name!r} would send identical judge requests "
                "(same base_url, model_id and default_params; writer_system_prompt is never "
                "sent to a judge): judge with one of them")
        seen[ident] = name


def _compact_json(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), check_circular=False)


def _schema_name(schema: Mapping[str, Any]) -> str:
    # OpenAI requires ^[a-zA-Z0-9_-]{1,64}$ for json_schema.name.
    title = schema.get("title")
    name = _SCHEMA_NAME_RE.sub("_", title)[:64] if isinstance(title, str) else ""
    return name or "response"


class Registry(BaseModel):
    """All configured models by name."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    models: dict[str, ModelSpec] = Field(min_length=1, description="Model specs by name.")
    source: str | None = Field(default=None, description="The file this registry was loaded from.")

    @model_validator(mode="after")
    def _keys_are_names(self) -> Registry:
        wrong = sorted(k for k, spec in self.models.items() if spec.name != k)
        if wrong:
            raise ValueError(f"registry keys must equal their spec's name: {', '.join(wrong)}")
        return self

    def get(self, name: str) -> ModelSpec:
        try:
            return self.models[name]
        except KeyError:
            known = ", ".join(sorted(self.models))
            where = f" in {self.source}" if self.source else ""
            raise UnknownNameError(f"no model named {name!r}{where}; known: {known}") from None

    def names(self) -> list[str]:
        return list(self.models)

    def enabled(self) -> list[ModelSpec]:
        """Enabled models, in file order."""
        return [spec for spec in self.models.values() if spec.enabled]

    def __contains__(self, name: object) -> bool:
        return name in self.models


def default_models_path() -> Path:
    """$ESSAYBENCH_MODELS if set (read now, not at import), else the project's registry
    (core.project: essaybench.toml's ``models``), else the shipped configs/models.yaml
    (the embedded model)."""
    named = os.environ.get(MODELS_ENV)
    if named:
        return Path(named)
    project, _ = project_or_error()
    return project.models if project is not None else resource("configs", "models.yaml")


def load_registry(path: Path | str | None = None) -> Registry:
    """Load and validate a registry file (default: ``default_models_path()``)."""
    path = Path(path) if path is not None else default_models_path()
    # yamlio never echoes a value or a source line: a pasted key stays out of the message
    doc = read_yaml(path, "model registry", error=RegistryError)
    models = doc.data.get("models")
    if set(doc.data) != {"models"} or not isinstance(models, dict):
        raise doc.fail("expected a mapping with only 'models', itself a mapping of model "
                       "name to settings")
    if not models:
        raise doc.fail("'models' is empty", at=("models",))
    specs: dict[str, ModelSpec] = {}
    for name, entry in models.items():
        at = ("models", name)
        if not isinstance(entry, dict):
            raise doc.fail(f"entry {name!r}: expected a mapping", at=at)
        if "name" in entry and entry["name"] != name:
            raise doc.fail(f"entry {name!r}: 'name' differs from the entry's key; leave it out",
                           at=(*at, "name"))
        specs[str(name)] = doc.validate(ModelSpec, {**entry, "name": str(name)}, at=at)
        _refuse_identical_requests(doc, specs, str(name))
    # From now on, whatever this process stores or prints is redacted of these keys.
    register_secret_envs(spec.api_key_env for spec in specs.values())
    return Registry(models=specs, source=str(path))


def _refuse_identical_requests(doc: YamlDocument, specs: Mapping[str, ModelSpec],
                               name: str) -> None:
    """Two entries that would send the same request (same endpoint, model id, default
    parameters and writer system prompt) have the same request keys: the gateway sends one
    call for both and the ledger cannot tell whose it was (generation aborted with "results
    out of order"). Refused at load, naming both entries, at the second one's line. Entries
    that differ only in ``writer_system_prompt`` write apart but would judge alike:
    ``judge_identity_clashes`` refuses them as two judges of one run."""
    spec = specs[name]
    for other, earlier in specs.items():
        if other == name:
            break
        if (*request_identity(earlier), earlier.writer_system_prompt) == (
                *request_identity(spec), spec.writer_system_prompt):
            raise doc.fail(
                f"entries {other!r} and {name!r} would send identical requests (same "
                "base_url, model_id and default_params), so their calls could not be told "
                "apart: remove one, or make them differ (e.g. in a parameter)",
                at=("models", name))
