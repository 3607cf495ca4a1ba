"""generate → length compliance → judge, chained on real tables through the fake server."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from essaybench.bench.compliance import compliance_table
from essaybench.bench.generate import GenerateParams, run_generate
from essaybench.bench.judge.judgments import run_judge
from essaybench.bench.judge.request import JudgeParams
from essaybench.bench.rubrics import load_rubric
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.session import open_gateway
from tests.llm.conftest import fake_spec, registry_of

PROMPTS = pl.DataFrame({
    "prompt_id": ["p1", "p2"],
    "text": ["写一篇议论文，谈谈诚信，不少于800字。", "描写家乡的秋天。"],
    "genre": ["argumentative", "descriptive"],
    "prompt_set": ["constrained", "open"],
})


def test_essays_table_feeds_the_judge_and_the_compliance_check(tmp_path: Path) -> None:
    scenario = FakeScenario.model_validate({
        "models": {"*": {"reply": "template", "template": "这是一篇作文。{prompt}"}},
        "faults": [{"kind": "status", "status": 400, "models": ["writer-b"]}],
    })
    registry = registry_of(fake_spec("writer-a", model_id="writer-a"),
                           fake_spec("writer-b", model_id="writer-b", max_retries=0),
                           fake_spec("judge", model_id="judge"))
    with run_fake_server(scenario) as server, open_gateway(
            registry, tmp_path, ["writer-a", "writer-b", "judge"],
            base_urls=dict.fromkeys(["writer-a", "writer-b", "judge"], server.base_url)
    ) as session:
        essays = run_generate(PROMPTS, GenerateParams(models=("writer-a", "writer-b")),
                              session, "ps-test").table
        judged = run_judge(essays, JudgeParams(judges=["judge"]), session).table
    assert essays.height == 4
    assert sorted(essays.filter(pl.col("status") == "ok")["model"].to_list()) == ["writer-a"] * 2
    assert judged.height == 4
    ok = judged.filter(pl.col("status") == "ok")
    skipped = judged.filter(pl.col("status") == "skipped")
    assert ok.height == 2 and skipped.height == 2
    assert skipped["score_weighted"].null_count() == 2  # a failed essay never gets a score
    rubric = load_rubric()
    for row in ok.iter_rows(named=True):
        scores = json.loads(row["scores"])
        assert sorted(scores) == sorted(rubric.question_ids(row["genre"]))
        assert 10.0 <= row["score_weighted"] <= 100.0
    checked = compliance_table(essays, prompt_column="prompt_text")
    verdicts = dict(zip(checked["prompt_id"], checked["length_verdict"], strict=False))
    assert verdicts["p2"] is None or verdicts["p2"] == "no_requirement"
    assert "under" in checked.filter(pl.col("prompt_id") == "p1")["length_verdict"].to_list()


def test_chain_ends_in_table5(tmp_path: Path) -> None:
    from essaybench.bench.aggregate import table5, to_markdown

    registry = registry_of(fake_spec("writer", model_id="writer"),
                           fake_spec("judge", model_id="judge"))
    with run_fake_server() as server, open_gateway(
            registry, tmp_path, ["writer", "judge"],
            base_urls={"writer": server.base_url, "judge": server.base_url}) as session:
        essays = run_generate(PROMPTS, GenerateParams(models=("writer",), samples=2),
                              session, "ps-test").table
        judged = run_judge(essays, JudgeParams(judges=["judge"]), session).table
    t5 = table5(judged)
    row = t5.row(0, named=True)
    assert (row["judge"], row["model"]) == ("judge", "writer")
    assert row["overall:n"] == 4 and row["overall:coverage"] == 1.0
    expected = judged.filter(pl.col("genre") == "argumentative")["score_weighted"].mean()
    assert row["argumentative/constrained"] == expected
    assert "writer" in to_markdown(t5, "weighted")
