from __future__ import annotations

import pytest

from essaybench.llm.structured import (
    StructuredError,
    parse_json_reply,
    parse_structured,
    reask_message,
)

SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer", "enum": list(range(1, 11))},
                   "why": {"type": "string", "maxLength": 20}},
    "required": ["score", "why"],
    "additionalProperties": False,
}


def test_plain_fenced_and_raw_newline_json() -> None:
    assert parse_json_reply('{"a": 1}') == {"a": 1}
    assert parse_json_reply('```json\n{"a": 1}\n```') == {"a": 1}
    assert parse_json_reply('{"a": "line1\nline2"}') == {"a": "line1\nline2"}


def test_invalid_json_names_position() -> None:
    with pytest.raises(StructuredError, match=r"not valid JSON.*line 1"):
        parse_json_reply('{"a": ')


def test_schema_violations_name_the_field() -> None:
    assert parse_structured('{"score": 7, "why": "清楚"}', SCHEMA) == {"score": 7, "why": "清楚"}
    with pytest.raises(StructuredError, match=r"at score: 11 is not one of"):
        parse_structured('{"score": 11, "why": "x"}', SCHEMA)
    with pytest.raises(StructuredError, match="'why' is a required property"):
        parse_structured('{"score": 3}', SCHEMA)
    with pytest.raises(StructuredError, match="at why"):
        parse_structured('{"score": 3, "why": "' + "长" * 30 + '"}', SCHEMA)


def test_reask_wording_comes_from_rubrics() -> None:
    msg = reask_message("at score: 11 is not one of [1..10]")
    assert "at score: 11" in msg and "JSON" in msg
