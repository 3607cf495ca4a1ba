"""Judge against people: the tables of the ``agreement`` stage (pure; no store, no IO).

For every judge and every scoring variant the judgments carry (weighted, w/o WT,
Align-Score) — the paper's Tables 2–4 from the user's own annotations, always on exactly
the annotated essays the judge scored (:mod:`essaybench.human.matched`):

* ``judge_human``: Spearman ρ and Kendall τ between the human ranking (voting-based
  scores for pairwise annotations, mean scores for absolute ones) and the judge's,
  overall and per genre, two ways: over the model means (``model means``) and averaged
  over per-prompt correlations with a bootstrap CI over prompts (``per-prompt mean``);
  the number of essays, prompts and models compared on every row;
* ``annotators``: Fleiss' κ among annotators (and, for absolute scores, agreement of
  every annotator pair: exact, within ±1, weighted κ, Spearman);
* ``sensitivity`` (with tiers): Mann–Whitney U share of (higher tier, lower tier) essay
  pairs where the judge scores the higher tier higher, its p-value, and the mean
  difference with its standard deviation. Tiers of absolute annotations are sets of human
  scores (each essay's mean over annotators); of pairwise annotations, the top-, median-
  and bottom-ranked essays of each prompt by voting score (``top/median/bottom``), or sets
  of within-prompt ranks (:mod:`essaybench.human.pairwise_tiers`).
"""

from __future__ import annotations

from typing import Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

from essaybench.bench.stats_tables import VARIANTS
from essaybench.human.agreement import annotator_pairs, fleiss_kappa_long
from essaybench.human.annotations import ScoreScale
from essaybench.human.matched import KEYS, Matched, judge_human_agreement, match_essays
from essaybench.human.pairwise_tiers import TOP_MEDIAN_BOTTOM, pairwise_tiers
from essaybench.human.sensitivity import tier_sensitivity, tiers_from_scores
from essaybench.human.voting import judge_scores, pairwise_fleiss, with_sample_index


class Tiers(BaseModel):
    """The values of each quality tier: human scores (absolute annotations, e.g. high [3],
    medium [2], low [0, 1]) or within-prompt ranks by voting score (pairwise annotations,
    1 = best, e.g. high [1], medium [4], low [7])."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    high: tuple[float, ...] = Field(min_length=1)
    medium: tuple[float, ...] = Field(min_length=1)
    low: tuple[float, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _disjoint(self) -> Tiers:
        sets = [set(self.high), set(self.medium), set(self.low)]
        if any(a & b for i, a in enumerate(sets) for b in sets[i + 1:]):
            raise ValueError(f"tiers overlap: high={sorted(sets[0])}, medium={sorted(sets[1])}, "
                             f"low={sorted(sets[2])}")
        return self

    def values(self) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
        return self.high, self.medium, self.low


class AgreementParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    annotations: str = Field(description="Path of the annotations file (.jsonl or .csv).")
    kind: Literal["pairwise", "absolute"]
    tiers: Tiers | Literal["top/median/bottom"] | None = Field(
        default=None, description="Tiers for the sensitivity analysis: absolute annotations, "
        "sets of human scores (each essay's mean); pairwise, 'top/median/bottom' (the top-, "
        "median- and bottom-ranked essay of each prompt by voting score) or sets of "
        "within-prompt ranks (1 = best).")
    annotations_sha256: str | None = Field(
        default=None, description="Filled in by the stage: the file's content hash.")
    ignore_unknown: bool = Field(
        default=False, description="Leave out (and count) annotation rows naming prompts, "
        "models or essays the run does not have, instead of failing on them.")
    scale: tuple[float, float] | None = Field(
        default=None, description="Absolute annotations only: (low, high) of the scale the "
                                  "annotators scored on; every score must lie on it (default "
                                  "0–10, the judge's own sub-question scale).")
    seed: int = Field(default=0, description="Seed of the bootstrap over prompts.")
    n_boot: int = Field(default=2000, ge=100, description="Bootstrap replicates.")

    @model_validator(mode="after")
    def _tiers_fit_the_kind(self) -> AgreementParams:
        if self.tiers == TOP_MEDIAN_BOTTOM and self.kind != "pairwise":
            raise ValueError(f"tiers {TOP_MEDIAN_BOTTOM!r} apply to pairwise annotations only; "
                             "absolute annotations take sets of scores, e.g. 3/2/0,1")
        if isinstance(self.tiers, Tiers) and self.kind == "pairwise":
            ranks = [v for part in self.tiers.values() for v in part]
            if any(v < 1 or v != int(v) for v in ranks):
                raise ValueError(f"pairwise tiers are within-prompt ranks (whole numbers from "
                                 f"1 = best) or {TOP_MEDIAN_BOTTOM!r}, got {ranks}")
        if self.scale is not None:
            if self.kind != "absolute":
                raise ValueError("a scale applies to absolute annotations only")
            self.score_scale()  # finite low < high, else ValueError
        return self

    def score_scale(self) -> ScoreScale | None:
        """The declared scale (None: ``load_checked`` applies the default)."""
        return None if self.scale is None else ScoreScale(*self.scale)


def _variants(judgments: pl.DataFrame) -> list[str]:
    return [c for c in VARIANTS if c in judgments.columns
            and judgments.filter(pl.col("status") == "ok")[c].null_count()
            < judgments.filter(pl.col("status") == "ok").height]


def _labelled(df: pl.DataFrame, judge: str, column: str) -> pl.DataFrame:
    return df.select(pl.lit(judge).alias("judge"), pl.lit(VARIANTS[column]).alias("variant"),
                     pl.all())


def _annotator_tables(annotations: pl.DataFrame, kind: str) -> pl.DataFrame:
    if kind == "pairwise":
        fk = pairwise_fleiss(annotations)
    else:
        fk = fleiss_kappa_long(annotations, items=KEYS, label="score")
    return pl.DataFrame([{"statistic": "fleiss_kappa", "value": fk.kappa,
                          "n_items": fk.n_items, "n_raters": fk.n_raters,
                          "n_items_dropped": fk.n_items_dropped}])


def essay_tiers(matched: Matched, tiers: Tiers | str) -> pl.DataFrame:
    """KEYS and ``tier`` of every compared essay (null: in no tier)."""
    if matched.kind == "pairwise":
        return pairwise_tiers(matched.human, tiers if isinstance(tiers, str)
                              else tiers.values()).select(*KEYS, "tier")
    if isinstance(tiers, str):
        raise ValueError(f"tiers {tiers!r} apply to pairwise annotations only")
    return matched.human.select(*KEYS, tiers_from_scores(
        "score", high=tiers.high, medium=tiers.medium, low=tiers.low).alias("tier"))


def _sensitivity(matched: Matched, tiers: Tiers | str) -> pl.DataFrame:
    items = essay_tiers(matched, tiers).join(
        matched.essays.select(*KEYS, pl.col("judge").alias("signal")), on=KEYS, how="inner")
    return tier_sensitivity(items, signal="signal")


def build_agreement_tables(annotations: pl.DataFrame, judgments: pl.DataFrame,
                           params: AgreementParams) -> dict[str, pl.DataFrame]:
    """Every table of the stage (pure)."""
    annotations = with_sample_index(annotations)
    tables: dict[str, pl.DataFrame] = {}
    rows, sens = [], []
    for judge in sorted({str(j) for j in judgments["judge"].to_list()}):
        for column in _variants(judgments):
            matched = match_essays(annotations, params.kind,
                                   judge_scores(judgments, column, judge=judge))
            rows.append(_labelled(judge_human_agreement(matched, seed=params.seed,
                                                        n_boot=params.n_boot), judge, column))
            if params.tiers is not None:
                sens.append(_labelled(_sensitivity(matched, params.tiers), judge, column))
    if rows:
        tables["judge_human"] = pl.concat(rows, how="diagonal_relaxed")
    tables["annotators"] = _annotator_tables(annotations, params.kind)
    if params.kind == "absolute" and annotations["annotator"].n_unique() > 1:
        tables["annotator_pairs"] = annotator_pairs(annotations, items=KEYS)
    if sens:
        tables["sensitivity"] = pl.concat(sens, how="diagonal_relaxed")
    return tables
