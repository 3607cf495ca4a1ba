"""Which essays meet: the pairwise stage's settings, its designs and the pairs they make.

The designed comparisons are either every model against one ``baseline`` model
(``model_a`` = the candidate, ``model_b`` = the baseline, so "A" means the candidate
won) or ``all_pairs`` (``model_a`` before ``model_b`` in the model order). Sample ``i``
of one model meets sample ``i`` of the other. A pair whose essays are not both ``ok``
is not sent: its rows are ``skipped`` with the reason. Tags and seeds derive from a
content hash of the pair, so a rerun asks for exactly the same calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Literal, Self

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

from essaybench.bench.judge.request import ESSAY_COLUMNS, ESSAY_ERROR_COLUMN
from essaybench.bench.pairwise.tables import (
    Order,
)
from essaybench.core.hashing import canonical_json, content_hash, sha256_hex
from essaybench.llm.types import CallStatus

STAGE = "pairwise"
SEED_RANGE = 2**31 - 1  # fits every server's seed type (llama.cpp uint32, OpenAI int64)


class PairwiseParams(BaseModel):
    """Pairwise-stage settings. ``models`` restricts and orders the compared models
    (default: every model in the essays table, sorted by name)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    judges: list[str] = Field(min_length=1)
    design: Literal["baseline", "all_pairs"] = "all_pairs"
    baseline: str | None = Field(default=None, description="Required by design 'baseline'.")
    models: list[str] | None = Field(default=None, min_length=2)
    temperature: float = Field(default=0.2, ge=0)
    max_tokens: int = Field(default=2048, ge=1)
    analysis_max_chars: int = Field(
        default=4000, ge=50, le=20000,
        description="maxLength of the judge's analysis; a local llama.cpp judge needs a few "
        "hundred (its grammar parser rejects thousands).")
    seed: int = Field(default=0, description="Mixed into every per-request seed.")
    rubric_path: str | None = Field(default=None, description="Genre rubric (the criteria).")
    prompt_path: str | None = Field(default=None, description="Pairwise prompt file.")

    @model_validator(mode="after")
    def _design(self) -> Self:
        if self.design == "baseline" and self.baseline is None:
            raise ValueError("design 'baseline' needs a baseline model")
        if self.design == "all_pairs" and self.baseline is not None:
            raise ValueError("baseline is only used by design 'baseline'")
        for name, values in (("judges", self.judges), ("models", self.models or [])):
            twice = sorted({v for v in values if values.count(v) > 1})
            if twice:
                raise ValueError(f"{name} listed twice: {twice}")
        if self.models is not None and self.baseline is not None \
                and self.baseline not in self.models:
            raise ValueError(f"baseline {self.baseline!r} is not among models {self.models}")
        return self


@dataclass(frozen=True)
class Pair:
    """One designed comparison on one prompt sample; ``skip_reason`` set when not sendable."""

    prompt_id: str
    sample_index: int
    genre: str
    prompt_set: str
    prompt_text: str
    model_a: str
    model_b: str
    essay_a: str | None
    essay_b: str | None
    skip_reason: str | None = None

    @property
    def pair_id(self) -> str:
        return "pw-" + content_hash({
            "prompt_id": self.prompt_id, "sample_index": self.sample_index,
            "prompt_text": self.prompt_text, "model_a": self.model_a, "model_b": self.model_b,
            "essay_a": self.essay_a, "essay_b": self.essay_b})

    def tag(self, order: Order) -> str:
        return f"{self.pair_id}:{order}"

    def shown(self, order: Order) -> tuple[str, str]:
        """(first, second) essay texts as the judge sees them in ``order``."""
        assert self.essay_a is not None and self.essay_b is not None
        return (self.essay_a, self.essay_b) if order == "AB" else (self.essay_b, self.essay_a)


def designed_pairs(models: Sequence[str], params: PairwiseParams) -> list[tuple[str, str]]:
    """(model_a, model_b) pairs of the design, in model order."""
    if params.design == "all_pairs":
        return list(combinations(models, 2))
    if params.baseline not in models:
        raise ValueError(f"{STAGE}: baseline {params.baseline!r} wrote no essays; models: "
                         f"{list(models)}")
    return [(m, str(params.baseline)) for m in models if m != params.baseline]


def _check_essays(essays: pl.DataFrame) -> None:
    missing = [c for c in ESSAY_COLUMNS if c not in essays.columns]
    if missing:
        raise ValueError(f"{STAGE}: essays table lacks column(s) {missing}")


def _why_not(row: Mapping[str, Any] | None, model: str) -> str | None:
    if row is None:
        return f"no essay from {model}"
    if row["status"] == CallStatus.OK.value:
        return None
    why = row.get(ESSAY_ERROR_COLUMN)
    return f"essay of {model} has status {row['status']}" + (f": {why}" if why else "")


def build_pairs(essays: pl.DataFrame, params: PairwiseParams) -> list[Pair]:
    """Every designed pair on every (prompt, sample), in essay-table order. A prompt that
    leaves the genre open or offers a choice (null genre) has no pairs: its two essays may
    have chosen different genres, and no one rubric's criteria compare them."""
    _check_essays(essays)
    by_key: dict[tuple[str, str, int], dict[str, Any]] = {}
    slots: dict[tuple[str, int], dict[str, Any]] = {}
    for row in essays.iter_rows(named=True):
        key = (str(row["prompt_id"]), str(row["model"]), int(row["sample_index"]))
        if key in by_key:
            raise ValueError(f"{STAGE}: essay {key} appears twice")
        by_key[key] = row
        slots.setdefault((key[0], key[2]), row)
    models = params.models or sorted({m for _, m, _ in by_key})
    pairs: list[Pair] = []
    for (pid, sample), first in slots.items():
        if first["genre"] is None:
            continue
        for model_a, model_b in designed_pairs(models, params):
            row_a, row_b = by_key.get((pid, model_a, sample)), by_key.get((pid, model_b, sample))
            reasons = [r for r in (_why_not(row_a, model_a), _why_not(row_b, model_b)) if r]
            texts = (None, None) if reasons or row_a is None or row_b is None else \
                (str(row_a["essay_text"]), str(row_b["essay_text"]))
            pairs.append(Pair(
                prompt_id=pid, sample_index=sample, genre=str(first["genre"]),
                prompt_set=str(first["prompt_set"]), prompt_text=str(first["prompt_text"]),
                model_a=model_a, model_b=model_b, essay_a=texts[0], essay_b=texts[1],
                skip_reason="; ".join(reasons) or None))
    return pairs


def call_seed(seed: int, pair_id: str, order: Order) -> int:
    """Deterministic per call, so a rerun is the same request (and a ledger hit)."""
    digest = sha256_hex(canonical_json({"seed": seed, "pair_id": pair_id, "order": order}))
    return int(digest[:15], 16) % SEED_RANGE
