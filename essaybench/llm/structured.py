"""Structured replies: parse the model's text as JSON and validate it against the schema."""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

import jsonschema
import yaml
from pydantic import BaseModel, ConfigDict

from essaybench.paths import project_dir

_FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


class StructuredError(ValueError):
    """The reply is not JSON, or not JSON that satisfies the schema."""


def parse_json_reply(text: str) -> Any:
    """JSON from a reply; tolerates a Markdown code fence and raw newlines inside strings."""
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text
    try:
        # strict=False: small local models put raw newlines inside JSON strings.
        return json.loads(body, strict=False)
    except json.JSONDecodeError as exc:
        raise StructuredError(f"not valid JSON ({exc.msg} at line {exc.lineno} "
                              f"column {exc.colno})") from exc


@cache
def _validator(schema_json: str) -> jsonschema.protocols.Validator:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate(value: Any, schema: dict[str, Any]) -> None:
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
    path = project_dir("rubrics") / "gateway" / "reask.v1.yaml"
    return _Reask.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))


def reask_message(error: str) -> str:
    return reask_template().template.format(error=error)
