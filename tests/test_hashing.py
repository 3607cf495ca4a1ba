"""Content-hash identities must never change: ledgers of past runs are keyed by them."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from essaybench.hashing import canonical_json
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
