"""The ``agreement`` and ``wpb_report`` stages: how far the judge agrees with people.

``agreement`` reads a run's ``judge`` snapshot and a file of human annotations
(pairwise with several annotators per pair, or absolute scores; see
:mod:`essaybench.human.annotations`) and reports, for every judge and every scoring
variant the judgments carry (weighted, w/o WT, Align-Score) — the paper's Tables 2–4
from the user's own annotations:

* ``judge_human``: Spearman ρ and Kendall τ between the human ranking (voting-based
  scores for pairwise annotations, mean scores for absolute ones) and the judge's
  ranking, overall and per genre;
* ``annotators``: Fleiss' κ among annotators (and, for absolute scores, agreement of
  every annotator pair: exact, within ±1, weighted κ, Spearman);
* ``sensitivity`` (absolute annotations with tiers): Mann–Whitney U share of
  (higher tier, lower tier) essay pairs where the judge scores the higher tier
  higher, its p-value, and the mean difference with its standard deviation.

``wpb_report`` builds the WritingPreferenceBench report (real human labels of 20 LLMs)
from its data folder. Both write a snapshot and Markdown/CSV/Parquet under
``<store>/reports/<run_id>/<stage>/``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

from essaybench.aggregate import export
from essaybench.analysis import VARIANTS
from essaybench.curate.table import StageOutput
from essaybench.human.agreement import annotator_pairs, fleiss_kappa_long
from essaybench.human.annotations import load_absolute, load_pairwise
from essaybench.human.report import build_wpb_report
from essaybench.human.sensitivity import tier_sensitivity, tiers_from_scores
from essaybench.human.voting import (
    judge_human_agreement,
    judge_human_agreement_absolute,
    judge_scores,
    pairwise_fleiss,
)
from essaybench.stages import run_stage
from essaybench.store import Snapshot, Store

STAGE = "agreement"
WPB_STAGE = "wpb_report"


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

    @model_validator(mode="after")
    def _tiers_need_scores(self) -> AgreementParams:
        if self.tiers is not None and self.kind != "absolute":
            raise ValueError("tiers apply to absolute annotations only")
        return self


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


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _report(tables: dict[str, pl.DataFrame], folder: Path, title: str) -> Path:
    paths = export(tables, folder)
    report = folder / f"{folder.name}.md"
    report.write_text("\n".join([f"# {title}\n"]
                                + [paths[f"{n}.md"].read_text(encoding="utf-8") for n in tables]),
                      encoding="utf-8")
    return report


def agreement_stage(store: Store, run_id: str, params: AgreementParams,
                    judged: Snapshot) -> tuple[Snapshot, Path]:
    judged.require_stage("judge", STAGE)
    path = Path(params.annotations)
    annotations = (load_pairwise if params.kind == "pairwise" else load_absolute)(path)
    params = params.model_copy(update={"annotations_sha256": _sha256(path)})
    judgments = judged.read()
    folder = store.root / "reports" / run_id / STAGE

    def compute() -> StageOutput:
        tables = build_agreement_tables(annotations, judgments, params)
        report = _report(tables, folder, f"Judge–human agreement ({params.kind} annotations, "
                                         f"{path.name})")
        main = tables.get("judge_human", tables["annotators"])
        return StageOutput(main, {"report": str(report), "tables": sorted(tables)})

    snapshot = run_stage(store, run_id=run_id, stage=STAGE, upstream=[judged], params=params,
                         rows_in=annotations.height, compute=compute)
    return snapshot, folder


def wpb_report_stage(store: Store, run_id: str, data_dir: Path, *, seed: int = 0,
                     n_boot: int = 2000) -> tuple[Snapshot, Path]:
    """The WritingPreferenceBench report; the data files' hashes go into the params."""
    hashes = {p.name: _sha256(p) for p in sorted(Path(data_dir).glob("*.jsonl"))}
    folder = store.root / "reports" / run_id / WPB_STAGE

    def compute() -> StageOutput:
        report = build_wpb_report(data_dir, seed=seed, n_boot=n_boot)
        tables = report.tables()
        export(tables, folder)
        path = folder / f"{WPB_STAGE}.md"
        path.write_text(report.to_markdown(), encoding="utf-8")
        return StageOutput(report.ranking, {"report": str(path), "headline": report.headline()})

    snapshot = run_stage(store, run_id=run_id, stage=WPB_STAGE, upstream=[],
                         params={"data_dir": str(data_dir), "files": hashes, "seed": seed,
                                 "n_boot": n_boot}, compute=compute)
    return snapshot, folder
