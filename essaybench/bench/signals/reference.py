"""Gold items: a reference answer and acceptance criteria per prompt, and the
reference-based metrics of each essay against it.

A gold file (YAML) names the prompt set it belongs to and a version, and holds items
joined to the prompts by ``prompt_id``::

    prompt_set: sample
    version: g1
    items:
      - prompt_id: p-0001
        reference: 家乡的秋天……（参考范文）
        criteria: [写出家乡秋天的具体景物, 有真情实感]

Per ok essay of a gold prompt: character ROUGE-L F1 (``lexical.rouge_l``) and chrF
(sacrebleu's sentence chrF, character 6-grams, β = 2; 0 … 1 here) against the reference.
These are secondary figures, never the ranking: a good essay can share little with one
reference (many good answers exist; open prompts most of all), and overlap rewards
copying the reference's wording, not quality.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator
from sacrebleu.metrics.chrf import CHRF

from essaybench.bench.signals.lexical import content_chars, rouge_l
from essaybench.core.contracts import OK
from essaybench.core.hashing import sha256_hex
from essaybench.core.yamlio import read_config_bytes, read_yaml

SCHEMA: dict[str, type[pl.DataType]] = {
    "model": pl.Utf8, "prompt_id": pl.Utf8, "sample_index": pl.Int64,
    "ref_rouge_l": pl.Float64, "ref_chrf": pl.Float64}
_CHRF = CHRF()  # chrF2, character 6-grams, whitespace ignored


class GoldItem(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_id: str = Field(min_length=1)
    reference: str = Field(min_length=1, description="A reference answer (an essay).")
    criteria: tuple[str, ...] = Field(default=(), description="Acceptance criteria.")


class GoldSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_set: str = Field(min_length=1)
    version: str = Field(min_length=1)
    items: tuple[GoldItem, ...] = Field(min_length=1)

    @field_validator("items")
    @classmethod
    def _unique(cls, items: tuple[GoldItem, ...]) -> tuple[GoldItem, ...]:
        seen: set[str] = set()
        for item in items:
            if item.prompt_id in seen:
                raise ValueError(f"prompt_id {item.prompt_id!r} appears twice")
            seen.add(item.prompt_id)
        return items

    def by_prompt(self) -> dict[str, GoldItem]:
        return {i.prompt_id: i for i in self.items}


@dataclass(frozen=True)
class LoadedGold:
    gold: GoldSet
    fingerprint: str  # sha256 of the file's bytes


def load_gold(path: Path | str) -> LoadedGold:
    """Read and validate a gold file (a malformed one: a one-line YamlConfigError)."""
    raw = read_config_bytes(path, "gold file")
    gold = read_yaml(path, "gold file", content=raw).validate(GoldSet)
    return LoadedGold(gold, sha256_hex(raw))


def chrf(hypothesis: str, reference: str) -> float | None:
    """sacrebleu's sentence chrF on 0 … 1 (None: an empty text)."""
    if not content_chars(hypothesis) or not content_chars(reference):
        return None
    return float(_CHRF.sentence_score(hypothesis, [reference]).score) / 100


def reference_table(essays: pl.DataFrame, gold: GoldSet) -> pl.DataFrame:
    """Per ok essay of a gold prompt: ROUGE-L and chrF against its reference."""
    refs = gold.by_prompt()
    ok = essays.filter((pl.col("status") == OK) & pl.col("prompt_id").is_in(list(refs)))
    rows = [{"model": m, "prompt_id": p, "sample_index": s,
             "ref_rouge_l": rouge_l(t or "", refs[p].reference),
             "ref_chrf": chrf(t or "", refs[p].reference)}
            for m, p, s, t in ok.select("model", "prompt_id", "sample_index",
                                         "essay_text").iter_rows()]
    return pl.DataFrame(rows, schema=SCHEMA)


@dataclass(frozen=True)
class ReferenceSummary:
    model: str
    n_essays: int
    median_rouge_l: float | None
    median_chrf: float | None


def _median(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def summarise_reference(table: pl.DataFrame) -> list[ReferenceSummary]:
    out = []
    for model in sorted(set(table["model"].to_list())):
        rows = table.filter(pl.col("model") == model)
        out.append(ReferenceSummary(model, rows.height, _median(rows["ref_rouge_l"].to_list()),
                                    _median(rows["ref_chrf"].to_list())))
    return out
