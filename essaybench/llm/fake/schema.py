"""Deterministic JSON values for a JSON schema, valid or deliberately not, for the fake server.

Covers what structured-output requests use in practice (and what pydantic emits):
``type`` (or a list of types), object ``properties``/``required``, ``$ref`` into
``$defs``/``definitions``, ``anyOf``/``oneOf``/``allOf``, ``enum``, ``const``, string
``minLength``/``maxLength`` and a few ``format`` values, integer and number bounds
(inclusive and exclusive), boolean, null, and arrays with ``items``/``prefixItems``,
``minItems``/``maxItems``/``uniqueItems``. ``pattern`` and ``multipleOf`` are ignored.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping
from typing import Any

# Chinese characters, so generated strings look like what a judge or writer would return.
_CHARS = "文章结构清晰论证充分语言流畅情感真挚细节生动主题鲜明逻辑严密描写细腻层次分明"
_FORMATS = {
    "date-time": "2025-01-01T00:00:00Z",
    "date": "2025-01-01",
    "time": "00:00:00",
    "email": "fake@example.com",
    "uri": "https://example.com/fake",
    "uuid": "00000000-0000-4000-8000-000000000000",
}
_MAX_DEPTH = 8  # past this, objects keep only required fields and arrays their minimum


def generate_instance(schema: Mapping[str, Any], seed: int) -> Any:
    """A value valid under ``schema``; the same (schema, seed) always gives the same value."""
    return _Generator(schema, random.Random(seed)).value(schema, 0)


def violate(schema: Mapping[str, Any], valid: Any) -> Any:
    """A value that breaks ``schema``: a required field removed, else the wrong top-level type."""
    resolved = _Generator(schema, random.Random(0)).resolve(schema)
    required = resolved.get("required") or []
    if isinstance(valid, dict) and required:
        return {k: v for k, v in valid.items() if k != required[0]}
    types = _types(resolved)
    if "string" in types:
        return 12345
    if "object" in types or "array" in types:
        return 12345 if isinstance(valid, dict | list) else "not-an-object"
    return "not-a-number" if types & {"integer", "number", "boolean"} else [valid, valid]


def _types(schema: Mapping[str, Any]) -> set[str]:
    t = schema.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list):
        return {str(x) for x in t}
    return set()


class _Generator:
    def __init__(self, root: Mapping[str, Any], rng: random.Random) -> None:
        self.root = root
        self.rng = rng

    def resolve(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        """Follow local ``$ref`` pointers (``#/$defs/X``); sibling keywords override the target."""
        seen = 0
        while "$ref" in schema and seen < 32:
            ref = str(schema["$ref"])
            if not ref.startswith("#"):
                raise ValueError(f"only local $ref pointers are supported, got {ref!r}")
            target: Any = self.root
            for part in filter(None, ref[1:].split("/")):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **rest}
            seen += 1
        return schema

    def value(self, schema: Mapping[str, Any] | bool, depth: int) -> Any:
        if isinstance(schema, bool):  # `true` accepts anything
            return "任意"
        schema = self.resolve(schema)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return self.rng.choice(list(schema["enum"]))
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = [self.resolve(o) for o in schema[key]]
                # Prefer a real value over null: Optional[X] should exercise X.
                non_null = [o for o in options if _types(o) != {"null"}] or options
                return self.value(non_null[0], depth + 1)
        if "allOf" in schema:
            return self.value(_merge([self.resolve(s) for s in schema["allOf"]]), depth + 1)
        kind = self._kind(schema)
        if kind == "object":
            return self._object(schema, depth)
        if kind == "array":
            return self._array(schema, depth)
        if kind == "integer":
            return self._integer(schema)
        if kind == "number":
            return self._number(schema)
        if kind == "boolean":
            return self.rng.random() < 0.5
        if kind == "null":
            return None
        return self._string(schema)

    def _kind(self, schema: Mapping[str, Any]) -> str:
        t = schema.get("type")
        if isinstance(t, list):
            non_null = [x for x in t if x != "null"]
            return str(non_null[0]) if non_null else "null"
        if isinstance(t, str):
            return t
        if "properties" in schema:
            return "object"
        if "items" in schema or "prefixItems" in schema:
            return "array"
        return "string"

    def _object(self, schema: Mapping[str, Any], depth: int) -> dict[str, Any]:
        props: Mapping[str, Any] = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        out: dict[str, Any] = {}
        for name, sub in props.items():
            if depth < _MAX_DEPTH or name in required:
                out[name] = self.value(sub, depth + 1)
        for name in sorted(required - set(props)):
            out[name] = "任意"  # required but undescribed: any value is valid
        return out

    def _array(self, schema: Mapping[str, Any], depth: int) -> list[Any]:
        lo = int(schema.get("minItems", 0))
        hi = int(schema.get("maxItems", lo + 3))
        n = lo if depth >= _MAX_DEPTH else self.rng.randint(lo, max(lo, hi))
        prefix = list(schema.get("prefixItems") or [])
        items = schema.get("items", True)
        out: list[Any] = []
        seen: set[str] = set()
        tries = 0
        while len(out) < n and tries < 20 * (n + 1):
            tries += 1
            sub = prefix[len(out)] if len(out) < len(prefix) else items
            item = self.value(sub, depth + 1)
            if schema.get("uniqueItems"):
                key = json.dumps(item, sort_keys=True)
                if key in seen:
                    continue
                seen.add(key)
            out.append(item)
        return out

    def _integer(self, schema: Mapping[str, Any]) -> int:
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if "exclusiveMinimum" in schema:
            lo = math.floor(schema["exclusiveMinimum"]) + 1
        if "exclusiveMaximum" in schema:
            hi = math.ceil(schema["exclusiveMaximum"]) - 1
        low = math.ceil(lo) if lo is not None else (0 if hi is None or hi >= 0 else int(hi) - 100)
        high = math.floor(hi) if hi is not None else low + 100
        return self.rng.randint(low, max(low, high))

    def _number(self, schema: Mapping[str, Any]) -> float:
        lo = schema.get("minimum", schema.get("exclusiveMinimum"))
        hi = schema.get("maximum", schema.get("exclusiveMaximum"))
        low = float(lo) if lo is not None else (0.0 if hi is None or hi >= 0 else float(hi) - 100)
        high = float(hi) if hi is not None else low + 100.0
        # Stay strictly inside, so exclusive bounds hold too; round for readable output.
        x = round(low + (high - low) * (0.05 + 0.9 * self.rng.random()), 3)
        return x if low < x < high or low == high else (low + high) / 2

    def _string(self, schema: Mapping[str, Any]) -> str:
        fmt = schema.get("format")
        if isinstance(fmt, str) and fmt in _FORMATS:
            return _FORMATS[fmt]
        lo = int(schema.get("minLength", 1))
        hi = int(schema.get("maxLength", max(lo, 24)))
        n = self.rng.randint(min(lo, hi), max(min(lo, hi), min(hi, lo + 24)))
        return "".join(self.rng.choice(_CHARS) for _ in range(n))


def _merge(parts: list[Mapping[str, Any]]) -> dict[str, Any]:
    """allOf, shallowly: properties and required unioned, other keywords last one wins."""
    out: dict[str, Any] = {}
    props: dict[str, Any] = {}
    required: list[str] = []
    for part in parts:
        out.update({k: v for k, v in part.items() if k not in ("properties", "required")})
        props.update(part.get("properties") or {})
        required += [r for r in part.get("required") or [] if r not in required]
    if props:
        out["properties"] = props
    if required:
        out["required"] = required
    return out
