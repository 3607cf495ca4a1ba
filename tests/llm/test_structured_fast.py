"""The quick validity check never accepts what jsonschema rejects."""

from __future__ import annotations

import itertools
from typing import Any

import jsonschema
import pytest

from essaybench.bench.rubrics import load_rubric
from essaybench.llm.structured import StructuredError, surely_valid, validate


def _jsonschema_ok(value: Any, schema: dict[str, Any]) -> bool:
    """jsonschema's verdict, "integer" meaning a number written without a fraction or
    exponent as the gateway reads it (7.0 and 1e1 are re-asked: issue 25, item 17)."""
    cls = jsonschema.validators.validator_for(schema)
    strict = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        cls, type_checker=cls.TYPE_CHECKER.redefine(
            "integer", lambda _checker, instance: type(instance) is int))
    return bool(strict(schema).is_valid(value))


def test_agrees_with_jsonschema_on_judge_answers() -> None:
    rubric = load_rubric()
    schema = rubric.answer_schema("narrative", 20)
    ids = rubric.question_ids("narrative")
    good: dict[str, Any] = {"analysis": "分析", "scores": dict.fromkeys(ids, 7)}
    variants: list[Any] = [good, [], "x", None, {"analysis": "a" * 21, "scores": good["scores"]},
                           {"scores": good["scores"]}, {**good, "extra": 1}]
    for value in (0, 11, 7.0, True, "7", None):
        variants.append({**good, "scores": {**good["scores"], ids[0]: value}})
    variants.append({**good, "scores": {k: v for k, v in good["scores"].items() if k != ids[1]}})
    variants.append({**good, "scores": {**good["scores"], "q_x": 5}})
    variants.append({**good, "analysis": 3})
    for value in variants:
        expected = _jsonschema_ok(value, schema)
        assert not surely_valid(value, schema) or expected, value
        if expected:
            validate(value, schema)
        else:
            with pytest.raises(StructuredError):
                validate(value, schema)
    assert surely_valid(good, schema)


@pytest.mark.parametrize("schema", [
    {"type": "integer", "minimum": 1}, {"type": "number"}, {"type": "array"},
    {"enum": [1, "a"]}, {"enum": [True, 2]}, {"enum": [1.0, 3]}, {"enum": [False, 0, 1]},
    {"type": "object", "properties": {"a": {"type": "integer"}},
                         "patternProperties": {}},
    {"type": "object", "additionalProperties": {"type": "string"}}])
def test_unknown_keywords_go_to_jsonschema(schema: dict[str, Any]) -> None:
    for value in itertools.chain([0, 1, 2, 3, True, False, 1.0, 1.5, "a", [1], {"a": 1},
                                  {"a": "x"}]):
        assert not surely_valid(value, schema) or _jsonschema_ok(value, schema)


def test_the_nonce_schema_takes_the_quick_path() -> None:
    """judge_prompt.v2's answer schema is one per call (its nonce): the quick check must
    take it, or every reply builds and checks a jsonschema validator (~10 ms CPU, the
    paper-scale run's largest cost), and agree with jsonschema on what it takes."""
    rubric = load_rubric()
    schema = rubric.answer_schema("narrative", 20, nonce="9f86d081884c7d65")
    good: dict[str, Any] = {"nonce": "9f86d081884c7d65", "analysis": "分析",
                            "scores": dict.fromkeys(rubric.question_ids("narrative"), 7)}
    value: Any
    enum_schema: dict[str, Any]
    assert surely_valid(good, schema)
    for nonce in ("9f86d081884c7d66", "", 9, None, ["9f86d081884c7d65"], True):
        value = {**good, "nonce": nonce}
        assert not surely_valid(value, schema)
        assert not _jsonschema_ok(value, schema)
        with pytest.raises(StructuredError, match="nonce"):
            validate(value, schema)
    assert not surely_valid({k: v for k, v in good.items() if k != "nonce"}, schema)
    for enum_schema, value in (({"enum": ["a", 1]}, "a"), ({"type": "string", "enum": ["a"]},
                                                            "a"), ({"enum": [1, "1"]}, "1")):
        assert surely_valid(value, enum_schema) and _jsonschema_ok(value, enum_schema)
    for enum_schema, value in (({"type": "integer", "enum": ["a"]}, "a"),
                               ({"type": "string", "enum": [1]}, 1), ({"enum": [1]}, "1")):
        assert not surely_valid(value, enum_schema)
