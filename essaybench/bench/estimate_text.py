"""The sizes an estimate without ledger history reads from the text: an essay's length
from its prompt (the length it asks for, capped at max_tokens), a structured reply's from
its answer schema, and both in tokens of the model's tokenizer family
(:mod:`essaybench.llm.token_text`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from essaybench.constraints.length import length_requirement
from essaybench.llm.registry import ModelSpec
from essaybench.llm.token_text import TokenRatios, token_ratios

MIN_LENGTH_MARGIN = 1.2  # "不少于800字": assume essays run 20% past a minimum
DEFAULT_ESSAY_CHARS = 800  # a prompt that asks for no length (a school essay's usual)
# A writer stopped at a newline writes one paragraph: 98 characters is the mean of 2,802
# paragraphs of 200 real Chinese school essays (../shared/data/aes_dataset).
PARAGRAPH_CHARS = 98
# A free-text field of a structured reply (the judge's analysis): half its maxLength, at
# most this many characters. An assumption, not a measurement: a judge asked for at most
# 60 characters writes a sentence, one allowed 4,000 rarely fills them.
STRING_FILL = 0.5
STRING_CHARS_MAX = 1000
_FILLER = "文"  # a CJK character: analysis and reasons are Chinese prose


def ratios_of(spec: ModelSpec) -> TokenRatios:
    return token_ratios().for_family(spec.family)[1]


def requested_chars(prompt_text: str) -> float | None:
    """The essay length a prompt asks for: a target as is, a range's midpoint, a minimum
    plus MIN_LENGTH_MARGIN, a maximum as is; None when it asks for none."""
    requirement = length_requirement(prompt_text)
    if requirement is None:
        return None
    if requirement.approx_chars is not None:
        return float(requirement.approx_chars)
    lo, hi = requirement.min_chars, requirement.max_chars
    if lo is not None and hi is not None:
        return (lo + hi) / 2
    if lo is not None:
        return lo * MIN_LENGTH_MARGIN
    return None if hi is None else float(hi)


def stops_at_newline(spec: ModelSpec) -> bool:
    """The writer's parameters stop it at a line break (the demo's one-paragraph essays)."""
    stop = spec.default_params.get("stop")
    stops = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    return any(isinstance(s, str) and s.strip(" ") == "\n" for s in stops)


def essay_tokens(prompt_text: str, writer: TokenRatios, cap: int | None, *,
                 one_paragraph: bool = False) -> float:
    """Tokens of the essay a writer answers ``prompt_text`` with: the requested length (or
    DEFAULT_ESSAY_CHARS; one paragraph, PARAGRAPH_CHARS, when the writer stops at a line
    break) in the writer's tokens of Chinese prose, at most ``cap``."""
    asked = requested_chars(prompt_text)
    chars = DEFAULT_ESSAY_CHARS if asked is None else asked
    tokens = writer.cjk * (min(chars, PARAGRAPH_CHARS) if one_paragraph else chars)
    return tokens if cap is None else min(tokens, float(cap))


def expected_reply(schema: Mapping[str, Any]) -> str:
    """A reply of the size a model answering ``schema`` writes: every property present,
    a fixed or enumerated value as given (a nonce, a genre), a score as one digit, free
    text at STRING_FILL of its maxLength (at most STRING_CHARS_MAX)."""
    return json.dumps(_value(schema), ensure_ascii=False)


def _value(schema: Mapping[str, Any]) -> Any:
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        choices = schema["enum"]
        return choices[len(choices) // 2]  # a score 1-10: one digit, as most are
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return _value(schema[key][0])
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        return {name: _value(sub) for name, sub in (schema.get("properties") or {}).items()}
    if kind == "array":
        return [_value(schema.get("items") or {})
                for _ in range(int(schema.get("minItems", 1)))]
    if kind in ("integer", "number"):
        return 5
    if kind == "boolean":
        return True
    limit = int(schema.get("maxLength", 2 * STRING_CHARS_MAX))
    return _FILLER * min(round(limit * STRING_FILL), STRING_CHARS_MAX)


def reply_tokens(schema: Mapping[str, Any] | None, judge: TokenRatios, cap: int | None) -> float:
    """Tokens of a structured reply to ``schema`` (``cap`` when there is none), at most
    ``cap``."""
    if schema is None:
        return float(cap or 0)
    tokens = judge.tokens(expected_reply(schema))
    return tokens if cap is None else min(tokens, float(cap))


def shared_prefix(render: Callable[[str, str], Sequence[Mapping[str, str]]]) -> str:
    """What every request ``render(prompt, essay)`` makes begins with, whatever the prompt
    and essay (the rubric's system message, for a judge prompt that keeps it the same for
    every essay of a genre): the part a provider's prompt cache serves again."""
    first = "".join(m["content"] for m in render("甲甲", "乙乙"))
    second = "".join(m["content"] for m in render("丙丙", "丁丁"))
    same = next((i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b),
                min(len(first), len(second)))
    return first[:same]
