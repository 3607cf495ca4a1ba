from __future__ import annotations

import pytest

from essaybench.llm.structured import (
    StructuredError,
    looks_like_refusal,
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


@pytest.mark.parametrize("score", ["7.0", "1e1", "10.0"])
def test_an_integer_is_written_as_one(score: str) -> None:
    """Issue 25, item 17: JSON Schema's "integer" takes 7.0 and 1e1; the gateway did too,
    so a judge writing them was not re-asked (and the judge's parse then failed the
    judgment). The gateway's check now refuses them: a re-ask says what was wrong."""
    with pytest.raises(StructuredError, match="is not of type 'integer'"):
        parse_structured(f'{{"score": {score}, "why": "x"}}', SCHEMA)
    assert parse_structured('{"score": 10, "why": "x"}', SCHEMA) == {"score": 10, "why": "x"}


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


@pytest.mark.parametrize(("text", "why"), [
    # issue 13: the old reader took the last object found anywhere in the reply
    ('分析：论点明确。\n最终评分：{"score": 8, "why": "好"}\n以上。',
     "text before the JSON object"),
    ('{"score": 3, "why": "x"} 修改后 {"score": 9, "why": "y"}', "text after the JSON object"),
    ('{"score": 3, "why": "x"}\n{"score": 9, "why": "y"}', "a second JSON object follows"),
    ('我的分析如下。\n```json\n{"score": 6, "why": "z"}\n```\n谢谢。', "text before the JSON"),
    ('```json\n{"score": 6, "why": "z"}\n```\n```json\n{"score": 9, "why": "z"}\n```',
     "text after the JSON object"),
    ('{"score": 3, "why": "x", "score": 10}', "duplicate key 'score'"),
    ('{"score": 3, "why": {"a": 1, "a": 2}}', "duplicate key 'a'"),
    ('{"score": NaN, "why": "x"}', "NaN is not JSON"),
    ("评分：很好 {没有闭合", "text before the JSON object"),
    ("评分：很好", "not valid JSON"),
])
def test_only_exactly_one_json_value_is_read(text: str, why: str) -> None:
    with pytest.raises(StructuredError, match=why):
        parse_json_reply(text)
    with pytest.raises(StructuredError, match=why):
        parse_structured(text, SCHEMA)


def test_a_fence_around_the_whole_reply_is_allowed() -> None:
    for text in ('```json\n{"score": 6, "why": "z"}\n```', '```\n{"score": 6, "why": "z"}```',
                 '\n  {"score": 6, "why": "z"}  \n'):
        assert parse_structured(text, SCHEMA) == {"score": 6, "why": "z"}


def test_an_error_names_where_the_extra_text_starts() -> None:
    with pytest.raises(StructuredError, match=r"line 2 column 1"):
        parse_json_reply('{"score": 3, "why": "x"}\n{"score": 9}')


@pytest.mark.parametrize("text, refused", [
    ("抱歉，我无法对这篇作文进行评分。", True),
    ("I'm sorry, but I can't help with that.", True),
    ("作为一个AI，我不能评价。", True),
    ("这篇作文写得很好，结构清楚。", False),  # prose, not a refusal: re-asked
    ('抱歉，格式如下：{"score": 7}', False),  # carries JSON: a parse problem, not a refusal
    ("好的。" + "这是分析。" * 40 + "抱歉", False),  # the phrase is not at the opening
])
def test_refusal_is_told_from_malformed(text: str, refused: bool) -> None:
    assert looks_like_refusal(text) is refused
