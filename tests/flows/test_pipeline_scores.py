"""The weekly pipeline under Prefect with scripted essays and judge replies: exact scores.

Three writers on the fake server mark their essays 【甲】【乙】【丙】; a fourth writer's
endpoint is down. The judge answers by rule (matched on the essay marker and the genre's
first question id), so every judgment is known in advance:

* 甲 and 乙: fixed score patterns per genre → exact Table 5 means, weighted and w/o WT;
* 丙: argumentative → JSON in a code fence (read, ok); narrative → a worded refusal
  (refused); descriptive → scores of 11 (parse_error after the re-ask); expository → a
  sub-question missing (parse_error). Only the argumentative cells have a mean;
  coverage counts the failures;
* the dead endpoint: every essay api_error, every judgment skipped, coverage 0.

Two of the prompts leave the genre to the essay (the bundled set's 文体不限 prompts, kept
by configs/curate.yaml): the judge is asked each essay's genre first, answering by rule
too (甲 narrative, 乙 expository, 丙 argumentative), and scores it with that genre's
rubric; those judgments sit in that genre's constrained cell.

The expected numbers come from plain arithmetic over the rubric file, not from
essaybench.bench.scoring.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import polars as pl
import pytest
import yaml

from essaybench.bench.rubrics import Rubric, load_rubric, rubrics_dir
from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from tests.helpers import expected_scores

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_engine")]

GENRES = ("argumentative", "narrative", "descriptive", "expository")
MARKS = {"writer-a": "【甲】", "writer-b": "【乙】", "writer-c": "【丙】"}
PATTERNS = {"writer-a": lambda i: 1 + (7 * i + 3) % 10, "writer-b": lambda i: 10 - i % 4,
            "writer-c": lambda i: 2 + i % 8}
# The genre each writer's essays of an open-genre prompt chose, as the judge says.
CHOSEN = {"writer-a": "narrative", "writer-b": "expository", "writer-c": "argumentative"}
GENRE_QUESTION = "待判断的作文"  # in the genre call's user message only (genre_prompt.v1)


def _scores(rubric: Rubric, genre: str, writer: str) -> dict[str, int]:
    return {q: PATTERNS[writer](i) for i, q in enumerate(rubric.question_ids(genre))}


def _answer(scores: dict[str, object]) -> str:
    return json.dumps({"analysis": "结构清楚，论据充分。", "scores": scores}, ensure_ascii=False)


def _judge_rules(rubric: Rubric) -> list[dict[str, object]]:
    # the genre calls: the nonce the schema fixes is echoed, as a judge following it would
    rules: list[dict[str, object]] = [
        {"contains": [MARKS[w], GENRE_QUESTION], "reply": json.dumps({"genre": g}),
         "echo_constants": True} for w, g in CHOSEN.items()]
    for genre in GENRES:
        first_q = rubric.question_ids(genre)[0] + "："  # the judge prompt's question line
        for writer in ("writer-a", "writer-b"):
            rules.append({"contains": [MARKS[writer], first_q],
                          "reply": _answer(dict(_scores(rubric, genre, writer)))})
        c = _scores(rubric, "argumentative", "writer-c")
        # JSON after prose is no judgment (issue 13); a fence around the whole reply is fine
        bad = {"argumentative": "```json\n" + _answer(dict(c)) + "\n```",
               "narrative": "抱歉，我无法对这篇作文进行评分。",
               "descriptive": _answer({q: 11 for q in rubric.question_ids("descriptive")}),
               "expository": _answer({q: 5 for q in rubric.question_ids("expository")[1:]})}
        rules.append({"contains": [MARKS["writer-c"], first_q], "reply": bad[genre]})
    return rules


def _dead_url() -> str:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_pipeline_publishes_exact_scores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from essaybench.flows.pipeline import pipeline_flow

    rubric = load_rubric()
    writers = {w: {"reply": "template", "template": mark + "{prompt}"}
               for w, mark in MARKS.items()}
    scenario = FakeScenario.model_validate({"models": {
        **writers, "judge": {"rules": _judge_rules(rubric), "enforce_max_tokens": False}}})
    with run_fake_server(scenario) as server:
        common = {"provider": "fake", "family": "fake", "structured_output": "json_schema",
                  "max_concurrency": 4, "timeout_s": 10, "max_retries": 0, "max_reasks": 1}
        models = {m: {**common, "base_url": server.base_url, "model_id": m}
                  for m in (*MARKS, "judge")}
        models["writer-down"] = {**common, "base_url": _dead_url(), "model_id": "down"}
        registry = tmp_path / "models.yaml"
        registry.write_text(yaml.safe_dump({"models": models}), encoding="utf-8")
        monkeypatch.setenv("ESSAYBENCH_MODELS", str(registry))
        config = tmp_path / "benchmark.yaml"
        config.write_text(yaml.safe_dump({
            "per_genre": 2, "generate": {"models": [*MARKS, "writer-down"]},
            # The judge's replies are scripted by rules on the rubric text, which v1
            # keeps in the user message (and v1 asks for no nonce).
            "judge": {"judges": ["judge"],
                      "judge_prompt": str(rubrics_dir() / "judge_prompt.v1.yaml")},
            "drift": None,
            # writer-down's 0% and 丙's 25% would fail the run (tests/flows/test_run_health.py);
            # here the published numbers are the point.
            "health": {"coverage_floor": 0}}), encoding="utf-8")
        out = pipeline_flow(str(config), str(PROJECT_ROOT / "configs" / "curate.yaml"),
                            str(tmp_path / "store"))
        per_model = server.stats().per_model
    # 10 essays per live writer (2 per genre, 2 of open-genre prompts); 甲/乙 judged once
    # each; 丙: fenced 1 (2 + its 2 open-genre essays), refusal 1 (no re-ask), the two
    # schema failures 2 each (one re-ask); a genre call for each live writer's 2 open-genre
    # essays. Judged while generating (the open-genre essays by the judge stage, after
    # their genre calls); the judge stage of the same run re-sends nothing, failures
    # included (a rerun would retry those).
    assert {m: per_model[m].received for m in MARKS} == {m: 10 for m in MARKS}
    assert per_model["judge"].received == 10 + 10 + (2 + 2) + 2 + 4 + 4 + 3 * 2

    reports = Path(out["reports"])
    judged = pl.read_parquet(next((tmp_path / "store" / "snapshots" / "judge")
                                  .glob(f"{out['judge']}.parquet")))
    status = {(r["model"], r["genre"]): r["status"] for r in judged.iter_rows(named=True)}
    assert {status["writer-c", g] for g in GENRES} == {"ok", "refused", "parse_error"}
    assert status["writer-c", "narrative"] == "refused"
    assert status["writer-c", "descriptive"] == status["writer-c", "expository"] == "parse_error"
    assert {s for (m, _), s in status.items() if m == "writer-down"} == {"skipped"}
    chosen = judged.filter(pl.col("genre_source") == "judge")
    assert sorted(chosen.select("model", "genre", "prompt_set").rows()) == sorted(
        (w, g, "constrained") for w, g in CHOSEN.items() for _ in range(2))
    assert set(chosen["genre_call_status"]) == {"ok"} and set(chosen["status"]) == {"ok"}
    # no essay, no genre call: writer-down's open-genre judgments are skipped, genre unknown
    down_choice = judged.filter((pl.col("model") == "writer-down") & pl.col("genre").is_null())
    assert down_choice.height == 2 and set(down_choice["status"]) == {"skipped"}
    assert judged.filter(pl.col("status") != "ok")["score_weighted"].null_count() == \
        judged.filter(pl.col("status") != "ok").height  # a failed judgment never has a score

    table = {r["model"]: r for r in pl.read_parquet(reports / "table5_weighted.parquet")
             .iter_rows(named=True)}
    plain = {r["model"]: r for r in pl.read_parquet(reports / "table5_unweighted.parquet")
             .iter_rows(named=True)}
    for writer in ("writer-a", "writer-b"):
        expect = {g: expected_scores(rubric, g, _scores(rubric, g, writer)) for g in GENRES}
        for genre in GENRES:
            for prompt_set in ("open", "constrained"):
                cell = f"{genre}/{prompt_set}"
                assert table[writer][cell] == pytest.approx(expect[genre][0], abs=1e-9)
                assert plain[writer][cell] == pytest.approx(expect[genre][1], abs=1e-9)
                assert table[writer][f"{cell}:coverage"] == 1.0
                chosen_here = 2 if (genre, prompt_set) == (CHOSEN[writer], "constrained") else 0
                assert table[writer][f"{cell}:chosen"] == chosen_here
                assert table[writer][f"{cell}:rows"] == 1 + chosen_here
        # the mean over the 10 essays: 2 of each genre and 2 more of the chosen one
        assert table[writer]["overall"] == pytest.approx(
            (2 * sum(e[0] for e in expect.values()) + 2 * expect[CHOSEN[writer]][0]) / 10,
            abs=1e-9)
        assert plain[writer]["overall"] == pytest.approx(
            (2 * sum(e[1] for e in expect.values()) + 2 * expect[CHOSEN[writer]][1]) / 10,
            abs=1e-9)
        assert (table[writer]["overall:n"], table[writer]["overall:chosen"]) == (10, 2)

    c = table["writer-c"]
    arg_c = expected_scores(rubric, "argumentative", _scores(rubric, "argumentative", "writer-c"))
    assert c["overall"] == pytest.approx(arg_c[0], abs=1e-9)
    # ok: its 2 argumentative essays and the 2 whose chosen genre is argumentative
    assert (c["overall:n"], c["overall:rows"], c["overall:coverage"]) == (4, 10, 0.4)
    assert c["argumentative/open"] == pytest.approx(arg_c[0], abs=1e-9)
    assert c["argumentative/constrained"] == pytest.approx(arg_c[0], abs=1e-9)
    assert (c["argumentative/constrained:n"], c["argumentative/constrained:chosen"]) == (3, 2)
    for genre in GENRES[1:]:
        assert c[f"{genre}/open"] is None and c[f"{genre}/open:coverage"] == 0.0

    down = table["writer-down"]
    assert down["overall"] is None and down["overall:coverage"] == 0.0
    assert (down["overall:rows"], down["overall:chosen"]) == (10, 0)
    essays = pl.read_parquet(next((tmp_path / "store" / "snapshots" / "generate")
                                  .glob(f"{out['generate']}.parquet")))
    assert set(essays.filter(pl.col("model") == "writer-down")["status"]) == {"api_error"}
    assert set(essays.filter(pl.col("model") != "writer-down")["status"]) == {"ok"}
    # the published Markdown carries the same number
    md = (reports / "table5_weighted.md").read_text(encoding="utf-8")
    assert f"{table['writer-a']['overall']:.1f}" in md
