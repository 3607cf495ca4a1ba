"""Structured replies: parse the model's text as JSON and validate it against the schema."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from typing import Any

import jsonschema
from pydantic import BaseModel, ConfigDict, Field

from essaybench.core.paths import project_dir
from essaybench.core.yamlio import load_model

_FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


class StructuredError(ValueError):
    """The reply is not JSON, or not JSON that satisfies the schema."""


_FENCED_ANYWHERE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)\n?\s*```", re.DOTALL)
# strict=False: small local models put raw newlines inside JSON strings.
_DECODER = json.JSONDecoder(strict=False)


def _embedded_objects(text: str) -> list[Any]:
    """Top-level JSON objects inside prose, left to right (an object's own braces skipped)."""
    found: list[Any] = []
    at = text.find("{")
    while at != -1:
        try:
            value, end = _DECODER.raw_decode(text, at)
        except json.JSONDecodeError:
            at = text.find("{", at + 1)
            continue
        found.append(value)
        at = text.find("{", end)
    return found


def parse_json_reply(text: str) -> Any:
    """JSON from a reply: the whole text, else inside a Markdown fence, else the last JSON
    object embedded in prose ("分析……最终结果：{...}"), which is where a judge that ignores
    the JSON mode puts its answer after the analysis. The raw text is kept by the caller."""
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text
    try:
        return _DECODER.decode(body.strip())
    except json.JSONDecodeError as exc:
        whole_error = exc
    for block in reversed(_FENCED_ANYWHERE.findall(text)):
        try:
            return _DECODER.decode(block.strip())
        except json.JSONDecodeError:
            continue
    objects = _embedded_objects(text)
    if objects:
        return objects[-1]
    raise StructuredError(f"not valid JSON ({whole_error.msg} at line {whole_error.lineno} "
                          f"column {whole_error.colno})")


def reply_object(parsed_or_text: Any) -> Mapping[str, Any]:
    """A structured reply as a JSON object: already parsed, or read from its text with
    :func:`parse_json_reply`; :class:`StructuredError` when it is neither."""
    value = parsed_or_text
    if isinstance(value, str):
        try:
            value = parse_json_reply(value)
        except StructuredError as exc:
            raise StructuredError(f"reply is {exc}") from exc
    if not isinstance(value, Mapping):
        raise StructuredError(f"reply must be a JSON object, got {type(value).__name__}")
    return value


class _Refusal(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    version: str
    window: int = Field(gt=0)
    phrases: tuple[str, ...] = Field(min_length=1)


@cache
def refusal_rules() -> _Refusal:
    return load_model(_Refusal, project_dir("rubrics") / "gateway" / "refusal.v1.yaml",
                      "refusal rules")


def looks_like_refusal(text: str) -> bool:
    """No JSON object anywhere, and a refusal phrase at the start (rubrics/gateway)."""
    if "{" in text:
        return False
    rules = refusal_rules()
    opening = text.strip()[: rules.window].lower()
    return any(p.lower() in opening for p in rules.phrases)


@cache
def _validator(schema_json: str) -> jsonschema.protocols.Validator:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def surely_valid(value: Any, schema: dict[str, Any]) -> bool:
    """A quick check for the schema subset of our judge answers (object, string with
    maxLength, integer enum): True only where jsonschema accepts ``value`` too; any other
    keyword or value shape returns False and goes to jsonschema (~0.85 ms per judge
    reply there, a fifth of a call's client CPU)."""
    keys = schema.keys()
    kind = schema.get("type")
    if "enum" in schema:
        allowed = schema["enum"]
        if not (keys <= {"type", "enum"} and kind in (None, "integer")
                and type(value) is int and isinstance(allowed, list)):
            return False
        try:
            # The first equal member must be an int too: 1 == 1.0 == True in Python, and
            # jsonschema does not take True for 1 (looking it up beats checking every member).
            return type(allowed[allowed.index(value)]) is int
        except ValueError:
            return False
    if kind == "string":
        limit = schema.get("maxLength")
        return (keys <= {"type", "maxLength"} and isinstance(value, str)
                and (limit is None or (type(limit) is int and len(value) <= limit)))
    if kind != "object" or not keys <= {"type", "properties", "required",
                                        "additionalProperties"} or type(value) is not dict:
        return False
    props = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    if not isinstance(props, dict) or extra not in (True, False):
        return False
    if any(k not in value for k in schema.get("required", ())):
        return False
    if extra is False and any(k not in props for k in value):
        return False
    return all(isinstance(sub, dict) and surely_valid(value[k], sub)
               for k, sub in props.items() if k in value)


def validate(value: Any, schema: dict[str, Any]) -> None:
    if surely_valid(value, schema):
        return
    validator = _validator(json.dumps(schema, sort_keys=True))
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(root)"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise StructuredError(f"at {where}: {first.message}{more}")


def parse_structured(text: str, schema: dict[str, Any]) -> Any:
    value = parse_json_reply(text)
    validate(value, schema)
    return value


class _Reask(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    version: str
    template: str


@cache
def reask_template() -> _Reask:
    return load_model(_Reask, project_dir("rubrics") / "gateway" / "reask.v1.yaml",
                      "re-ask template")


def reask_message(error: str) -> str:
    return reask_template().template.format(error=error)
