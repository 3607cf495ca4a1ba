"""Judge–human agreement of one imported pack, and its trend over weeks.

Per import (one run, one week): over the checked essays (each essay's human score is the
mean over its annotators), Spearman ρ and Kendall τ-b between human and judge 0–100 scores,
their mean absolute difference; over the sub-questions (every annotator's score against
the judge's), exact and ±1 agreement and quadratic-weighted Cohen's κ
(:mod:`essaybench.human.agreement`). The week is the ISO week of the judge snapshot.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import polars as pl

from essaybench.bench.spot.importer import Imported
from essaybench.human.agreement import kendall, rater_agreement, spearman

TREND_FILE = "agreement.parquet"
KEYS = ["prompt_id", "model", "sample_index"]


def iso_week(when: datetime) -> str:
    year, week, _ = when.isocalendar()
    return f"{year}-W{week:02d}"


def judge_questions(judgments: pl.DataFrame) -> pl.DataFrame:
    """(prompt_id, model, sample_index, question, judge) from the ok rows' ``scores`` JSON."""
    rows = [{"prompt_id": p, "model": m, "sample_index": int(s), "question": q,
             "judge": int(v)}
            for p, m, s, scores in judgments.filter(pl.col("status") == "ok").select(
                *KEYS, "scores").iter_rows() if scores
            for q, v in json.loads(scores).items()]
    return pl.DataFrame(rows, schema={"prompt_id": pl.Utf8, "model": pl.Utf8,
                                      "sample_index": pl.Int64, "question": pl.Utf8,
                                      "judge": pl.Int64})


def import_agreement(imported: Imported, judgments: pl.DataFrame, *, run_id: str,
                     week: str, score: str = "score_weighted") -> pl.DataFrame:
    """One row: the agreement of ``imported`` with the run's judge (module docstring)."""
    judge = judgments.filter(pl.col("status") == "ok").select(
        *KEYS, pl.col(score).cast(pl.Float64).alias("judge"))
    human = imported.essays.group_by(KEYS).agg(pl.col("score").mean().alias("human"))
    essays = human.join(judge, on=KEYS, how="inner")
    questions = imported.questions.join(judge_questions(judgments),
                                        on=[*KEYS, "question"], how="inner")
    if essays.is_empty() or questions.is_empty():
        raise ValueError("no annotated essay has an ok judge score")
    on_questions = rater_agreement(questions["human"], questions["judge"])
    return pl.DataFrame([{
        "week": week, "run_id": run_id, "n_essays": essays.height,
        "n_annotators": imported.questions["annotator"].n_unique(),
        "spearman": spearman(essays["human"], essays["judge"]).statistic,
        "kendall": kendall(essays["human"], essays["judge"]).statistic,
        "mean_abs_diff": float((essays["human"] - essays["judge"]).abs().mean()),  # type: ignore[arg-type]
        "question_exact": on_questions.exact, "question_within_one": on_questions.within_one,
        "question_kappa_quadratic": on_questions.kappa_quadratic}])


def trend(spot_root: Path) -> pl.DataFrame:
    """Every run's agreement row under ``spot_root`` (``<store>/spotcheck``), by week."""
    frames = [pl.read_parquet(p) for p in sorted(spot_root.glob(f"*/{TREND_FILE}"))]
    if not frames:
        return pl.DataFrame()
    return pl.concat(frames, how="diagonal_relaxed").sort("week", "run_id")
