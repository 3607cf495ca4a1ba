"""The labeller's ``max_tokens``, derived from its answer schema (issue 30, item 5).

A fixed 256 cut replies off: Chinese costs up to ~1.8 tokens per character in a small
model's tokenizer (SmolLM2), so a 200-character evidence alone can need 370 tokens. The
budget is the longest answer the schema allows — every key, the longest value of each
label (a list of every genre, where a choice is allowed), the evidence at its
``maxLength`` in Chinese characters — counted at the tokens per character of the model's
tokenizer family (``llm.token_text.token_ratios``: ``configs/token_ratios.yaml``, measured
by ``benchmarks/token_ratios.py``; a family it does not list is counted at the highest
ratios it holds), plus a margin for whitespace, a code fence and the end of the reply.
"""

from __future__ import annotations

import json
import math
from typing import Any

from essaybench.llm.token_text import token_ratios

MARGIN = 1.25  # reply tokens beyond the counted characters (whitespace, tokenizer spread)
FIXED_TOKENS = 16  # a code fence, a newline, the end-of-reply token
_CJK_FILL = "字"  # the evidence counted as Chinese characters, the costly script


def ratios(family: str | None) -> tuple[float, float]:
    """(tokens per CJK character, per other character) of ``family``; for a family the
    file does not list, the highest of each it holds."""
    table = {name: (r.cjk, max(r.latin, r.other))
             for name, r in token_ratios().families.items()}
    if family in table:
        return table[family]
    return max(c for c, _ in table.values()), max(o for _, o in table.values())


def _longest(node: dict[str, Any]) -> Any:
    """The value of a schema node that costs the most characters."""
    if "anyOf" in node:
        return max((_longest(n) for n in node["anyOf"]),
                   key=lambda v: len(json.dumps(v, ensure_ascii=False)))
    if node.get("type") == "array":
        items = [v for v in node.get("items", {}).get("enum", []) if v is not None]
        return items[: node.get("maxItems", len(items))]
    if "enum" in node:
        return max((v for v in node["enum"] if v is not None), key=len, default=None)
    if node.get("type") == "string":
        return _CJK_FILL * int(node.get("maxLength", 0))
    return None


def longest_answer(schema: dict[str, Any]) -> str:
    """The longest reply ``schema`` allows, as the model would write it (raw CJK)."""
    return json.dumps({k: _longest(v) for k, v in schema["properties"].items()},
                      ensure_ascii=False)


def answer_max_tokens(schema: dict[str, Any], family: str | None) -> int:
    """``max_tokens`` for replies to ``schema`` from a model of tokenizer ``family``."""
    text = longest_answer(schema)
    cjk_ratio, other_ratio = ratios(family)
    cjk = text.count(_CJK_FILL)
    tokens = cjk * cjk_ratio + (len(text) - cjk) * other_ratio
    return math.ceil(tokens * MARGIN) + FIXED_TOKENS
