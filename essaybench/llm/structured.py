"""Structured replies: parse the model's text as JSON and validate it against the schema.

A reply is read strictly (issue 13): it must be exactly one JSON value — the whole text,
or the whole of one Markdown code fence — with no key twice in any object and no
``NaN``/``Infinity``. Anything else is a :class:`StructuredError` whose message says what
was wrong, in words a re-ask can repeat to the model. Looking for an object inside prose
(the last one, the first one) is what let an essay put its own verdict into the judgment:
a reply that quotes a score object and is then cut off was scored from the quote.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache, lru_cache
from typing import Any

import jsonschema
from pydantic import BaseModel, ConfigDict, Field

from essaybench.core.paths import resource
from essaybench.core.yamlio import load_model

# The whole reply is one fence: ```json … ``` (or ``` … ```), only whitespace around it.
_FENCE = re.compile(r"^\s*```(?:json|JSON)?[ \t]*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


class StructuredError(ValueError):
    """The reply is not JSON, or not JSON that satisfies the schema."""


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # dict(pairs) in C, and the count compared: a key given twice would otherwise keep its
    # last value silently ({"q1": 3, "q1": 10} read as 10).
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


def _no_constant(name: str) -> Any:
    raise StructuredError(f"{name} is not JSON: numbers must be finite")


# strict=False: small local models put raw newlines inside JSON strings.
_DECODER = json.JSONDecoder(strict=False, object_pairs_hook=_unique_keys,
                            parse_constant=_no_constant)


def _where(text: str, at: int) -> str:
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    return f"line {line} column {column}"


def parse_json_reply(text: str) -> Any:
    """The one JSON value a reply consists of: its whole text, or the whole of one Markdown
    code fence. Raises :class:`StructuredError` saying what is wrong: text before or after
    the value (an object inside prose, a second object), a duplicated key, invalid JSON."""
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text
    start = len(body) - len(body.lstrip())
    try:
        value, end = _DECODER.raw_decode(body, start)
    except _DuplicateKey as exc:
        raise StructuredError(f"duplicate key {exc.args[0]!r} in a JSON object: every key "
                              "must appear once") from None
    except json.JSONDecodeError as exc:
        if exc.pos == start and "{" in body[start:]:
            raise StructuredError(
                "text before the JSON object: the reply must be the object alone, not "
                "prose around it") from None
        raise StructuredError(f"not valid JSON ({exc.msg} at {_where(body, exc.pos)})") from None
    rest = body[end:].lstrip()
    if rest:
        after = len(body) - len(body[end:].lstrip())
        what = ("a second JSON object follows the first" if rest.startswith("{")
                else "text after the JSON object")
        raise StructuredError(f"{what} (at {_where(body, after)}): reply with exactly one "
                              "JSON object and nothing else")
    return value


def reply_object(parsed_or_text: Any) -> Mapping[str, Any]:
    """A structured reply as a JSON object: read from its raw text with
    :func:`parse_json_reply` (strict), or, when no text exists, the already parsed value;
    :class:`StructuredError` when it is neither."""
    value = parsed_or_text
    if isinstance(value, str):
        try:
            value = parse_json_reply(value)
        except StructuredError as exc:
            raise StructuredError(f"reply is not one JSON object: {exc}") from exc
    if not isinstance(value, Mapping):
        raise StructuredError(f"reply must be a JSON object, got {type(value).__name__}")
    return value


def reply_of(text: str | None, parsed: Any) -> Any:
    """What a reader of a finished call reads: the raw reply text when there is one (the
    evidence, read strictly; a ledger row written by a laxer reader keeps its picked object
    in ``parsed``), else the parsed value."""
    return text if text is not None else parsed


class _Refusal(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    version: str
    window: int = Field(gt=0)
    phrases: tuple[str, ...] = Field(min_length=1)


@cache
def refusal_rules() -> _Refusal:
    return load_model(_Refusal, resource("rubrics") / "gateway" / "refusal.v1.yaml",
                      "refusal rules")


def looks_like_refusal(text: str) -> bool:
    """No JSON object anywhere, and a refusal phrase at the start (rubrics/gateway)."""
    if "{" in text:
        return False
    rules = refusal_rules()
    opening = text.strip()[: rules.window].lower()
    return any(p.lower() in opening for p in rules.phrases)


def _whole_number_written_as_such(checker: Any, instance: Any) -> bool:
    """``"integer"`` as a reply must write it: 7, not 7.0 or 1e1 (JSON Schema's own
    "integer" takes any number with no fractional part, and a judge that writes 7.0 has
    not followed the format: it is re-asked, as for any other schema error)."""
    return type(instance) is int


# Bounded: a schema per call (judge_prompt.v2's nonce) must not keep thousands alive.
@lru_cache(maxsize=64)
def _validator(schema_json: str) -> jsonschema.protocols.Validator:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    strict: type[jsonschema.protocols.Validator] = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        cls, type_checker=cls.TYPE_CHECKER.redefine("integer", _whole_number_written_as_such))
    return strict(schema)


def surely_valid(value: Any, schema: dict[str, Any]) -> bool:
    """A quick check for the schema subset of our judge answers (object, string with
    maxLength, integer enum, the nonce's string enum of one): True only where jsonschema
    accepts ``value`` too; any other keyword or value shape returns False and goes to
    jsonschema (~0.85 ms per judge reply there, a fifth of a call's client CPU; with a
    nonce, a schema per call, ~10 ms more to check the schema itself)."""
    keys = schema.keys()
    kind = schema.get("type")
    if "enum" in schema:
        allowed = schema["enum"]
        vtype = type(value)
        if not (keys <= {"type", "enum"} and isinstance(allowed, list)
                and ((vtype is int and kind in (None, "integer"))
                     or (vtype is str and kind in (None, "string")))):
            return False
        try:
            # The first equal member must be of the value's type: 1 == 1.0 == True in
            # Python, and jsonschema does not take True for 1 (looking it up beats checking
            # every member); a str equals only a str.
            return type(allowed[allowed.index(value)]) is vtype
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
    return load_model(_Reask, resource("rubrics") / "gateway" / "reask.v1.yaml",
                      "re-ask template")


def reask_message(error: str) -> str:
    return reask_template().template.format(error=error)
