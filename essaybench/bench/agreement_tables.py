"""Judge against people: the tables of the ``agreement`` stage (pure; no store, no IO).

For every judge and every scoring variant the judgments carry (weighted, w/o WT,
Align-Score) — the paper's Tables 2–4 from the user's own annotations:

* ``judge_human``: Spearman ρ and Kendall τ between the human ranking (voting-based
  scores for pairwise annotations, mean scores for absolute ones) and the judge's
  ranking, overall and per genre;
* ``annotators``: Fleiss' κ among annotators (and, for absolute scores, agreement of
  every annotator pair: exact, within ±1, weighted κ, Spearman);
* ``sensitivity`` (absolute annotations with tiers): Mann–Whitney U share of
  (higher tier, lower tier) essay pairs where the judge scores the higher tier
  higher, its p-value, and the mean difference with its standard deviation.
"""

from __future__ import annotations

from typing import Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

from essaybench.bench.stats_tables import VARIANTS
from essaybench.human.agreement import annotator_pairs, fleiss_kappa_long
from essaybench.human.annotations import ScoreScale
from essaybench.human.sensitivity import tier_sensitivity, tiers_from_scores
from essaybench.human.voting import (
    judge_human_agreement,
    judge_human_agreement_absolute,
    judge_scores,
    pairwise_fleiss,
)


class Tiers(BaseModel):
    """Human score values of each quality tier, e.g. high [3], medium [2], low [0, 1]."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    high: tuple[float, ...] = Field(min_length=1)
    medium: tuple[float, ...] = Field(min_length=1)
    low: tuple[float, ...] = Field(min_length=1)


class AgreementParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    annotations: str = Field(description="Path of the annotations file (.jsonl or .csv).")
    kind: Literal["pairwise", "absolute"]
    tiers: Tiers | None = Field(
        default=None, description="Absolute annotations only: tiers for the sensitivity "
                                  "analysis, from the mean human score of each essay.")
    annotations_sha256: str | None = Field(
        default=None, description="Filled in by the stage: the file's content hash.")
    ignore_unknown: bool = Field(
        default=False, description="Leave out (and count) annotation rows naming prompts, "
        "models or essays the run does not have, instead of failing on them.")
    scale: tuple[float, float] | None = Field(
        default=None, description="Absolute annotations only: (low, high) of the scale the "
                                  "annotators scored on; every score must lie on it (default "
                                  "0–10, the judge's own sub-question scale).")

    @model_validator(mode="after")
    def _tiers_need_scores(self) -> AgreementParams:
        if self.tiers is not None and self.kind != "absolute":
            raise ValueError("tiers apply to absolute annotations only")
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
        fk = fleiss_kappa_long(annotations, items=["prompt_id", "model"], label="score")
    return pl.DataFrame([{"statistic": "fleiss_kappa", "value": fk.kappa,
                          "n_items": fk.n_items, "n_raters": fk.n_raters,
                          "n_items_dropped": fk.n_items_dropped}])


def _sensitivity(annotations: pl.DataFrame, judgments: pl.DataFrame, tiers: Tiers,
                 judge: str, column: str) -> pl.DataFrame:
    human = (annotations.group_by("prompt_id", "model").agg(pl.col("score").mean())
             .with_columns(tiers_from_scores("score", high=tiers.high, medium=tiers.medium,
                                             low=tiers.low).alias("tier")))
    machine = (judgments.filter((pl.col("judge") == judge) & (pl.col("status") == "ok")
                                & pl.col(column).is_not_null())
               .group_by("prompt_id", "model").agg(pl.col(column).mean().alias("signal")))
    items = human.join(machine, on=["prompt_id", "model"], how="inner")
    return _labelled(tier_sensitivity(items, signal="signal"), judge, column)


def build_agreement_tables(annotations: pl.DataFrame, judgments: pl.DataFrame,
                           params: AgreementParams) -> dict[str, pl.DataFrame]:
    """Every table of the stage (pure)."""
    agree = (judge_human_agreement if params.kind == "pairwise"
             else judge_human_agreement_absolute)
    tables: dict[str, pl.DataFrame] = {}
    rows, sens = [], []
    for judge in sorted({str(j) for j in judgments["judge"].to_list()}):
        for column in _variants(judgments):
            scores = judge_scores(judgments, column, judge=judge)
            rows.append(_labelled(agree(annotations, scores), judge, column))
            if params.tiers is not None:
                sens.append(_sensitivity(annotations, judgments, params.tiers, judge, column))
    if rows:
        tables["judge_human"] = pl.concat(rows, how="diagonal_relaxed")
    tables["annotators"] = _annotator_tables(annotations, params.kind)
    if params.kind == "absolute" and annotations["annotator"].n_unique() > 1:
        tables["annotator_pairs"] = annotator_pairs(annotations)
    if sens:
        tables["sensitivity"] = pl.concat(sens, how="diagonal_relaxed")
    return tables
