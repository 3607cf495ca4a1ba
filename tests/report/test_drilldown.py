"""The drill-down: every essay of the run under its prompt, failures included, with the
judge's analysis and sub-question scores named from the rubric."""

from __future__ import annotations

import json

import polars as pl

from essaybench.report.data import load_run
from essaybench.report.drilldown import drilldown, requirement_text
from essaybench.report.labels import labels_for
from tests.report.conftest import HOSTILE, HOSTILE_ERROR, ReportedRuns


def test_every_essay_is_listed_under_its_prompt(reported_runs: ReportedRuns) -> None:
    data = load_run(reported_runs.store, "r2")
    prompts = drilldown(data.essays, data.judgments, labels_for(data.judgments))
    essays = [e for p in prompts for e in p.essays]
    # 4 prompts of each genre, then the 3 that leave the genre to the essay ("choice")
    assert len(prompts) == data.essays["prompt_id"].n_unique() == 19
    assert len(essays) == data.essays.height
    assert [p.genre for p in prompts] == sorted(
        (p.genre for p in prompts),
        key=["argumentative", "narrative", "descriptive", "expository", "choice"].index)
    assert [p.allowed_genres is not None for p in prompts] == [False] * 16 + [True] * 3
    failed = [e for e in essays if e.status != "ok"]
    assert failed and all(e.row_status == e.status == "api_error" for e in failed)
    assert all(e.text is None and e.error and HOSTILE_ERROR in e.error for e in failed)
    # A failed essay's judgment is listed too: skipped, with why.
    assert all(j.status == "skipped" and j.score_weighted is None
               for e in failed for j in e.judgments)
    material = next(p for p in prompts if p.text.startswith("阅读下面的材料"))
    assert ("material", "阅读下面的材料") in material.constraints
    assert material.requirement == "at least 800 characters"
    assert ("length", "不少于800字") in material.constraints
    hostile = [e for e in essays if e.text and e.text.startswith(HOSTILE)]
    assert {e.model for e in hostile} == {"qwen-writer"}
    assert {e.off_language for e in essays if e.model == "gpt-writer"} == {True}


def test_a_judgment_shows_its_analysis_scores_and_flags(reported_runs: ReportedRuns) -> None:
    data = load_run(reported_runs.store, "r2")
    labels = labels_for(data.judgments)
    prompts = drilldown(data.essays, data.judgments, labels)
    ok = next(j for p in prompts for e in p.essays for j in e.judgments if j.status == "ok")
    row = data.judgments.filter((pl.col("status") == "ok")
                                & (pl.col("analysis") == ok.analysis)).row(0, named=True)
    assert ok.score_weighted == row["score_weighted"]
    scores = json.loads(row["scores"])
    assert sum(len(t.scores) for t in ok.traits) == len(scores)
    names = {t.trait for t in ok.traits}
    assert names <= {t.name for t in labels.traits.values()}  # rubric names, not ids
    assert ok.flags == json.loads(row["essay_flags"]) + [
        f for f in json.loads(row["judgment_flags"]) if f not in json.loads(row["essay_flags"])]


def test_requirement_text() -> None:
    assert requirement_text(800, None, None) == "at least 800 characters"
    assert requirement_text(None, 600, None) == "at most 600 characters"
    assert requirement_text(400, 600, None) == "400–600 characters"
    assert requirement_text(540, 660, 600) == "about 600 characters"
    assert requirement_text(None, None, None) == "no length requirement"
