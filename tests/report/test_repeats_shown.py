"""Repeated judging's spread in the report and the CLI summary (issue 25 item 21): the
essays are judged 3 times on the fake server; the page and the summary printed after a
run show per model the calls and the spread, equal to a computation from the ledger's
own replies (the calls each judgment lists)."""

from __future__ import annotations

import json

import duckdb
import polars as pl
import pytest

from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.cli.benchmark import _print_reports
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.session import LEDGER_FILE, open_gateway
from essaybench.report.data import load_run
from essaybench.report.labels import labels_for
from essaybench.report.page import render_report
from essaybench.report.sections import judge_section
from essaybench.report.svg import ChartIds
from essaybench.stages.aggregate import aggregate_stage
from essaybench.stages.generate import generate_stage
from essaybench.stages.judge import judge_stage
from essaybench.store import Store
from tests.llm.conftest import fake_spec, registry_of

MODELS = ["a", "b", "judge"]


def _ledger_spreads(store: Store, judgments: pl.DataFrame) -> dict[str, float]:
    """Per writer: the mean over its essays of max − min of the main score of its judge
    calls, each call's score recomputed from the ledger's reply with the rubric's weights
    (independent of the judge stage's own bookkeeping)."""
    from essaybench.bench.rubrics import load_rubric

    rubric = load_rubric(None)
    alpha = rubric.alpha_default

    def weighted(genre: str, scores: dict[str, int]) -> float:  # the paper's formula
        traits = rubric.genre(genre).traits
        top = sum(alpha ** t.depth * 10 * len(t.questions) for t in traits)
        return 100 * sum(alpha ** t.depth * sum(scores[q.id] for q in t.questions)
                         for t in traits) / top

    with duckdb.connect(str(store.root / LEDGER_FILE), read_only=True) as con:
        parsed = dict(con.execute("SELECT key, parsed FROM llm_calls WHERE stage = 'judge' "
                                  "AND status = 'ok'").fetchall())
    out: dict[str, list[float]] = {}
    for model, genre, calls in judgments.select("model", "genre", "repeat_calls").iter_rows():
        scores = []
        for call in json.loads(calls):
            reply = json.loads(parsed[call["call_key"]])
            scores.append(weighted(genre, reply["scores"]))
        out.setdefault(model, []).append(max(scores) - min(scores))
    return {m: sum(v) / len(v) for m, v in out.items()}


def test_the_spread_is_on_the_page_and_in_the_summary(
        curated_copy: Store, capsys: pytest.CaptureFixture[str]) -> None:
    config = BenchmarkConfig(per_genre=1, genres=("narrative", "argumentative"),
                             generate=GenerateParams(models=("a", "b")),
                             judge=JudgeParams(judges=["judge"], repeats=3), drift=None)
    with run_fake_server() as server, open_gateway(
            registry_of(*(fake_spec(m, model_id=m) for m in MODELS)), curated_copy.root,
            MODELS, base_urls=dict.fromkeys(MODELS, server.base_url)) as session:
        gen = generate_stage(curated_copy, "r1", config, session)
        judged = judge_stage(curated_copy, "r1", config, gen, session)
    _, folder = aggregate_stage(curated_copy, "r1", judged)
    judgments = judged.read()
    expected = _ledger_spreads(curated_copy, judgments)
    assert all(v > 0 for v in expected.values())  # the fake's repeats differ

    data = load_run(curated_copy, "r1")
    section = judge_section(ChartIds(), data, "judge", labels_for(data.judgments))
    shown = {str(r["model"]): r for r in section.repeats}
    assert set(shown) == {"a", "b"}
    for model, spread in expected.items():
        assert shown[model]["spread_mean"] == pytest.approx(spread)
        assert (shown[model]["repeated"], shown[model]["calls"]) == (2, 6)
    page = render_report(data)
    assert 'class="repeats"' in page
    assert f"{expected['a']:.2f}" in page and f"{expected['b']:.2f}" in page

    _print_reports({"reports": str(folder), "run_id": "r1"}, 1.0)
    out = capsys.readouterr().out
    assert "Repeated judging" in out
    for model, spread in expected.items():
        assert (f"{model} × judge: 2 of 2 essays repeated, 6/6 calls ok; spread mean "
                f"{spread:.2f}") in out
