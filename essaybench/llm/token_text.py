"""Tokens from text alone, for an estimate without ledger history: characters counted by
script (CJK, Latin letters, the rest) at the tokens per character measured for the
model's tokenizer family (``configs/token_ratios.yaml``, written by
``benchmarks/token_ratios.py``), plus each tokenizer's per-message framing.

A family the file does not list is counted with its ``default`` entry."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from essaybench.core.paths import resource
from essaybench.core.yamlio import load_model

SCRIPTS = ("cjk", "latin", "other")
# CJK ideographs (with extensions), CJK symbols and punctuation, full-width forms: what
# Chinese prose is made of. Runs, not characters: one match per stretch of Chinese.
_CJK = re.compile("[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
                  "\U00020000-\U0002ffff]+")
_LATIN = re.compile("[A-Za-z]+")


def script_counts(text: str) -> dict[str, int]:
    """Characters of ``text`` per script (SCRIPTS); they sum to len(text)."""
    cjk = sum(map(len, _CJK.findall(text)))
    latin = sum(map(len, _LATIN.findall(text)))
    return {"cjk": cjk, "latin": latin, "other": len(text) - cjk - latin}


class TokenRatios(BaseModel):
    """One tokenizer's tokens per character of each script, and its chat framing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cjk: float = Field(gt=0)
    latin: float = Field(gt=0)
    other: float = Field(gt=0)
    per_message: float = Field(default=0, ge=0, description="Framing tokens per message.")
    per_request: float = Field(default=0, ge=0, description="Framing tokens per request.")
    source: str = Field(min_length=1, description="How the figures were measured.")

    def tokens(self, text: str) -> float:
        counts = script_counts(text)
        return counts["cjk"] * self.cjk + counts["latin"] * self.latin + (
            counts["other"] * self.other)

    def chars(self, tokens: float) -> float:
        """Characters of Chinese prose in ``tokens`` tokens (an essay's length)."""
        return tokens / self.cjk

    def request_tokens(self, messages: Sequence[Mapping[str, str]]) -> float:
        return self.per_request + sum(self.per_message + self.tokens(m["content"])
                                      for m in messages)


class TokenRatioTable(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    default: str = Field(description="The family whose ratios count an unlisted family.")
    families: dict[str, TokenRatios]

    def for_family(self, family: str) -> tuple[str, TokenRatios]:
        """(the family whose ratios apply, its ratios)."""
        name = family if family in self.families else self.default
        return name, self.families[name]


@functools.cache
def token_ratios() -> TokenRatioTable:
    table = load_model(TokenRatioTable, resource("configs", "token_ratios.yaml"),
                       "token ratios")
    if table.default not in table.families:
        raise ValueError(f"token_ratios.yaml: default {table.default!r} is not a family")
    return table
