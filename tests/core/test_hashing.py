"""Content-hash identities must never change: ledgers of past runs are keyed by them."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import pytest
from pydantic import ValidationError

from essaybench.core.hashing import SharedJson, canonical_json
from essaybench.llm.types import ChatRequest, Message


def test_canonical_json_is_the_sorted_compact_dump() -> None:
    samples: list[Any] = [
        {"b": [1, 2.5, True, None, "第一"], "a": {"z": {}, "y": []}},
        {"when": date(2025, 1, 2), "x": float("1e16"), "n": -0.0},
        ["$x", "{y}", "\n\t\u3000"], 7, "门",
    ]
    for obj in samples:
        assert canonical_json(obj) == json.dumps(
            obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def test_a_request_key_is_pinned() -> None:
    request = ChatRequest(
        model="m", messages=(Message(role="user", content="第1题：写一篇“门” $x {y}"),),
        params={"temperature": 0.2, "max_tokens": 2048}, sample_index=3,
        response_schema={"type": "object",
                         "properties": {"scores": {"enum": [1, 2.5, True, None]}}})
    key = request.key("http://x/v1", "gpt-x", {"temperature": 0.2, "max_tokens": 2048})
    assert key == "946efe7a85cae7da6fa91f6193bd76a8"  # computed before check_circular=False


def test_a_request_canonical_is_canonical_json_of_its_fields() -> None:
    schema = {"type": "object", "properties": {"b": {"enum": [1, 2.5]}, "a": {"type": "string"}}}
    for response_schema in (None, schema, schema, {"title": "题", "type": "object"}):
        request = ChatRequest(
            model="m", sample_index=2, response_schema=response_schema,
            messages=(Message(role="system", content="评分 \u3000\n"),
                      Message(role="user", content='引号" 与 \\ 反斜杠')))
        params = {"temperature": 0.2, "seed": 7, "max_tokens": 10}
        assert request.canonical("http://x/v1/", "gpt-x", params) == canonical_json({
            "endpoint": "http://x/v1", "model_id": "gpt-x",
            "messages": [m.model_dump() for m in request.messages], "params": params,
            "schema": response_schema, "sample_index": 2})


def test_shared_json_encodes_once_and_notices_changes() -> None:
    calls: list[object] = []

    def encode(obj: object) -> str:
        calls.append(obj)
        return canonical_json(obj)

    shared = SharedJson(max_entries=2)
    schema: dict[str, Any] = {"type": "object", "properties": {"q": {"enum": [1, 2]}}}
    assert shared.text(schema, "t", encode) == canonical_json(schema)
    assert not shared._entries  # asked once: not copied (a schema made for one call)
    assert shared.text(schema, "t", encode) == canonical_json(schema)
    assert shared.text(schema, "t", encode) == canonical_json(schema)
    assert len(calls) == 2  # kept when asked again: the third time from memory
    schema["properties"]["q"]["enum"].append(3)  # changed in place, deep inside
    assert shared.text(schema, "t", encode) == canonical_json(schema)
    assert len(calls) == 3
    assert shared.text(schema, "other", encode) == canonical_json(schema)  # tags apart
    assert shared.text(schema, "other", encode) == canonical_json(schema)
    assert shared.text({"x": 1}, "t", encode) == '{"x":1}'  # past max_entries: cleared
    assert len(calls) == 6


def test_shared_json_is_not_fooled_by_a_reused_id() -> None:
    """An object asked for once is held until asked again, so no other object can take
    its id meanwhile and be served its text."""
    shared = SharedJson(max_seen=2)
    for i in range(50):  # each dict freed right after: CPython reuses the address
        obj = {"n": i}
        assert shared.text(obj, "t", canonical_json) == canonical_json(obj)
        assert shared.text(obj, "t", canonical_json) == canonical_json(obj)
        assert shared.text({"n": -i}, "t", canonical_json) == canonical_json({"n": -i})


def test_a_request_keeps_its_schema_object() -> None:
    schema: dict[str, Any] = {"type": "object"}
    request = ChatRequest(model="m", messages=(Message(role="user", content="x"),),
                          response_schema=schema)
    assert request.response_schema is schema
    with pytest.raises(ValidationError):
        ChatRequest(model="m", messages=(Message(role="user", content="x"),),
                    response_schema=["not", "a", "dict"])  # type: ignore[arg-type]
