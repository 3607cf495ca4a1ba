"""The judge stage against the real fake server: statuses, scores, re-asks, ledger reruns."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from essaybench.bench.judge.judgments import judgments_table, run_judge
from essaybench.bench.judge.parse import JudgmentError, parse_judgment
from essaybench.bench.judge.reading import trait_specs
from essaybench.bench.judge.request import JudgeParams, build_judge_requests
from essaybench.bench.rubrics import Rubric, load_align_score, load_rubric, rubrics_dir
from essaybench.bench.scoring import essay_score
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.llm.retry import Backoff
from essaybench.llm.session import open_gateway
from essaybench.llm.types import CallStatus, ChatResult
from tests.helpers import expected_scores
from tests.llm.conftest import fake_spec, registry_of

# Replies here are scripted without the v2 prompt's nonce: these tests use the plain
# judge prompt (the nonce is tested in tests/bench/judge/test_nonce.py).
V1 = str(rubrics_dir() / "judge_prompt.v1.yaml")

FAST = Backoff(base_s=0.01, cap_s=0.05)


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric()


def essays(*statuses: str) -> pl.DataFrame:
    genres = ["argumentative", "narrative", "descriptive", "expository"]
    rows = [{"prompt_id": f"p{i}", "model": "writer", "sample_index": 0,
             "genre": genres[i % 4], "prompt_set": "open" if i % 2 else "constrained",
             "prompt_text": f"第{i}题：以“门”为题写一篇作文。",
             "essay_text": f"这是第{i}篇作文。门开了，我走了进去。",
             "status": status, "error": None if status == "ok" else "HTTP 500 upstream"}
            for i, status in enumerate(statuses)]
    return pl.DataFrame(rows)


def judge(server: FakeServerHandle, store: Path, table: pl.DataFrame,
          judges: tuple[str, ...] = ("judge-a",), **params: Any) -> pl.DataFrame:
    registry = registry_of(*(fake_spec(j, model_id=f"{j}-id", max_reasks=1) for j in judges))
    with open_gateway(registry, store, list(judges), backoff=FAST,
                      base_urls={j: server.base_url for j in judges}) as session:
        return run_judge(table, JudgeParams(judge_prompt=V1, judges=list(judges), **params),
                         session).table


def scripted(*replies: str) -> FakeScenario:
    return FakeScenario.model_validate(
        {"models": {"*": {"structured": "script", "structured_script": list(replies),
                          "enforce_max_tokens": False}}})


def reply(rubric: Rubric, genre: str, skip: str | None = None, value: Any = 7) -> str:
    scores = {q: value for q in rubric.question_ids(genre) if q != skip}
    return json.dumps({"analysis": "结构清楚。", "scores": scores}, ensure_ascii=False)


@pytest.fixture
def server() -> Iterator[FakeServerHandle]:
    with run_fake_server() as handle:
        yield handle


# --- parsing ---------------------------------------------------------------------------


def test_parse_judgment_accepts_exactly_the_questions_as_ints(rubric: Rubric) -> None:
    ids = rubric.question_ids("narrative")
    scores = parse_judgment(json.loads(reply(rubric, "narrative")), rubric, "narrative")
    assert list(scores) == ids and set(scores.values()) == {7}
    assert parse_judgment(reply(rubric, "narrative"), rubric, "narrative") == scores


@pytest.mark.parametrize(("mutate", "match"), [
    (lambda s, q: s.pop(q), "missing"),
    (lambda s, q: s.update({q: 7.0}), "integer"),
    (lambda s, q: s.update({q: True}), "integer"),
    (lambda s, q: s.update({q: 11}), "outside"),
    (lambda s, q: s.update({q: 0}), "outside"),
    (lambda s, q: s.update({q: "7"}), "integer"),
])
def test_parse_judgment_names_the_bad_question(rubric: Rubric, mutate: Any, match: str) -> None:
    qid = rubric.question_ids("argumentative")[3]
    parsed = json.loads(reply(rubric, "argumentative"))
    mutate(parsed["scores"], qid)
    with pytest.raises(JudgmentError, match=match) as info:
        parse_judgment(parsed, rubric, "argumentative")
    assert qid in str(info.value)


def test_parse_judgment_rejects_extras_and_non_objects(rubric: Rubric) -> None:
    parsed = json.loads(reply(rubric, "expository"))
    parsed["scores"]["bogus.q1"] = 5
    with pytest.raises(JudgmentError, match=r"bogus\.q1"):
        parse_judgment(parsed, rubric, "expository")
    for bad in ("不是JSON", "[1, 2]", '{"analysis": "x"}'):
        with pytest.raises(JudgmentError):
            parse_judgment(bad, rubric, "expository")


def test_requests_carry_stage_tag_schema_and_params(rubric: Rubric) -> None:
    params = JudgeParams(judge_prompt=V1, judges=["a", "b"])
    requests = build_judge_requests(essays("ok", "api_error", "ok"), params, rubric)
    assert [(r.model, r.tag) for r in requests] == [
        ("a", "p0#writer#0"), ("b", "p0#writer#0"), ("a", "p2#writer#0"), ("b", "p2#writer#0")]
    assert {r.stage for r in requests} == {"judge"}
    assert requests[0].response_schema == rubric.answer_schema("argumentative")
    assert requests[2].response_schema == rubric.answer_schema("descriptive")
    assert requests[0].params == {"temperature": 0.2, "max_tokens": 2048}
    with pytest.raises(ValueError):
        JudgeParams(judge_prompt=V1, judges=[])
    with pytest.raises(ValueError):
        JudgeParams(judge_prompt=V1, judges=["a"], alpha=2)  # type: ignore[call-arg]


# --- end to end against the fake server ------------------------------------------------


def test_ok_judgments_score_like_the_paper(server: FakeServerHandle, tmp_path: Path,
                                           rubric: Rubric) -> None:
    table = judge(server, tmp_path, essays("ok", "ok", "ok", "ok"))
    assert table["status"].to_list() == ["ok"] * 4
    for row in table.iter_rows(named=True):
        scores = json.loads(row["scores"])
        assert list(scores) == rubric.question_ids(row["genre"])
        weighted, unweighted = expected_scores(rubric, row["genre"], scores)
        assert row["score_weighted"] == pytest.approx(weighted, abs=1e-9)
        assert row["score_unweighted"] == pytest.approx(unweighted, abs=1e-9)
        traits = json.loads(row["trait_scores"])
        assert traits == {t.id: sum(scores[q.id] for q in t.questions)
                          for t in rubric.genres[row["genre"]].traits}
        assert row["judge"] == "judge-a" and row["judge_returned_model"] == "judge-a-id"
        assert row["rubric_id"] == rubric.id and row["rubric_fingerprint"] == rubric.fingerprint
        assert row["mode"] == "rubric" and row["error"] is None and row["raw_reply"]
        assert row["align_total"] is None


def test_missing_question_is_reasked_then_ok(tmp_path: Path, rubric: Rubric) -> None:
    genre = "argumentative"
    broken = reply(rubric, genre, skip=rubric.question_ids(genre)[0])
    with run_fake_server(scripted(broken, reply(rubric, genre, value=4))) as server:
        table = judge(server, tmp_path, essays("ok"))
        assert server.stats().totals.received == 2
    row = table.row(0, named=True)
    assert row["status"] == "ok"
    assert set(json.loads(row["scores"]).values()) == {4}
    assert row["score_weighted"] == pytest.approx(40.0)


def test_always_invalid_is_parse_error_without_score(tmp_path: Path, rubric: Rubric) -> None:
    genre = "argumentative"
    broken = reply(rubric, genre, skip=rubric.question_ids(genre)[0])
    with run_fake_server(scripted(broken)) as server:
        table = judge(server, tmp_path, essays("ok"))
    row = table.row(0, named=True)
    assert row["status"] == "parse_error"
    assert row["raw_reply"] == broken and row["error"]
    for col in ("scores", "score_weighted", "score_unweighted", "trait_scores"):
        assert row[col] is None, col


def test_float_scores_are_reasked(tmp_path: Path, rubric: Rubric) -> None:
    """A score written 7.0 (or 1e1) is not the format asked for: the gateway re-asks, as
    for any schema error (issue 25, item 17: its schema check let them through, and the
    judge's parse then failed the judgment without a re-ask)."""
    floats = reply(rubric, "argumentative", value=7.0)
    assert "7.0" in floats
    with run_fake_server(scripted(floats, reply(rubric, "argumentative"))) as server:
        table = judge(server, tmp_path, essays("ok"))
        assert server.stats().totals.received == 2  # re-asked once, answered right
    row = table.row(0, named=True)
    assert row["status"] == "ok" and row["score_weighted"] is not None
    with run_fake_server(scripted(floats)) as server:  # never right: out of re-asks
        again = judge(server, tmp_path / "again", essays("ok")).row(0, named=True)
        assert server.stats().totals.received > 1
    assert again["status"] == "parse_error" and "integer" in again["error"]
    assert again["score_weighted"] is None


def test_failed_essay_is_skipped_and_not_sent(server: FakeServerHandle, tmp_path: Path) -> None:
    table = judge(server, tmp_path, essays("ok", "api_error"))
    assert server.stats().totals.received == 1
    skipped = table.filter(pl.col("prompt_id") == "p1").row(0, named=True)
    assert skipped["status"] == "skipped" and "api_error" in skipped["error"]
    assert skipped["raw_reply"] is None and skipped["score_weighted"] is None
    assert skipped["scores"] is None


def test_two_judges_two_rows_each_and_rerun_from_ledger(server: FakeServerHandle,
                                                        tmp_path: Path) -> None:
    table = judge(server, tmp_path, essays("ok", "ok", "refused"), judges=("judge-a", "judge-b"))
    assert table.select("prompt_id", "judge").rows() == [
        ("p0", "judge-a"), ("p0", "judge-b"), ("p1", "judge-a"), ("p1", "judge-b"),
        ("p2", "judge-a"), ("p2", "judge-b")]
    assert table["status"].to_list() == ["ok"] * 4 + ["skipped"] * 2
    assert server.stats().totals.received == 4
    again = judge(server, tmp_path, essays("ok", "ok", "refused"), judges=("judge-a", "judge-b"))
    assert server.stats().totals.received == 4  # nothing paid twice
    assert again["from_ledger"].to_list()[:4] == [True] * 4
    same = ["scores", "score_weighted", "status", "judge"]
    assert again.select(same).equals(table.select(same))


def test_run_judge_meta_counts(server: FakeServerHandle, tmp_path: Path) -> None:
    registry = registry_of(fake_spec("judge-a", model_id="a-id"))
    with open_gateway(registry, tmp_path, ["judge-a"], backoff=FAST,
                      base_urls={"judge-a": server.base_url}) as session:
        out = run_judge(essays("ok", "api_error", "ok"),
                        JudgeParams(judge_prompt=V1, judges=["judge-a"]), session)
    assert out.meta["counts"] == {"judge-a": {"ok": 2, "skipped": 1}}
    assert out.counts() == {"kept": 2, "skipped": 1}


def test_align_score_mode_end_to_end(server: FakeServerHandle, tmp_path: Path) -> None:
    align = load_align_score()
    table = judge(server, tmp_path, essays("ok", "ok", "truncated"), mode="align_score")
    ok = table.filter(pl.col("status") == "ok")
    assert ok.height == 2
    for row in ok.iter_rows(named=True):
        scores = json.loads(row["scores"])
        assert list(scores) == align.score_ids()
        dims = [scores[d.id] for d in align.dimensions]
        assert row["align_total"] == pytest.approx(10.0 * scores[align.overall.id])
        assert row["dimension_mean"] == pytest.approx(10.0 * sum(dims) / len(dims))
        assert row["score_weighted"] is None and row["trait_scores"] is None
        assert row["rubric_id"] == align.id and row["rubric_fingerprint"] == align.fingerprint
        assert row["mode"] == "align_score"
    assert table.row(2, named=True)["status"] == "skipped"


# --- the table from results, without a server -----------------------------------------


def test_judgments_table_reads_each_reply_form_the_same(rubric: Rubric) -> None:
    """One reader per reply: parsed object (no text), its text and a fenced text score
    alike; prose around the object is no judgment (issue 13); a reply that fails keeps its
    analysis when it was an object."""
    genre = "argumentative"
    text = reply(rubric, genre, value=6)
    extra = json.loads(text)
    extra["scores"]["bogus.q1"] = 5
    forms: list[tuple[str, Any, str | None]] = [
        ("parsed", json.loads(text), None),
        ("text", None, text),
        ("fenced", None, f"```json\n{text}\n```"),
        ("prose", None, f"分析……最终结果：{text}"),
        ("extra", extra, json.dumps(extra, ensure_ascii=False)),
        ("not_json", None, "不是JSON"),
        ("api", None, None),
    ]
    table = essays(*(["ok"] * len(forms))).with_columns(pl.lit(genre).alias("genre"))
    params = JudgeParams(judge_prompt=V1, judges=["j"])
    requests = build_judge_requests(table, params, rubric)
    results = [ChatResult(key=f"k{i}", model="j", status=CallStatus.OK if name != "api"
                          else CallStatus.API_ERROR, parsed=parsed, text=raw,
                          error="HTTP 500" if name == "api" else None)
               for i, (name, parsed, raw) in enumerate(forms)]
    rows = judgments_table(table, requests, results, rubric, params).rows(named=True)
    by_form = {name: row for (name, _, _), row in zip(forms, rows, strict=True)}
    expected = essay_score(trait_specs(rubric, genre), dict.fromkeys(
        rubric.question_ids(genre), 6), alpha=rubric.alpha_default)
    scored = ("scores", "score_weighted", "score_unweighted", "trait_scores", "analysis")
    for name in ("parsed", "text", "fenced"):
        row = by_form[name]
        assert (row["status"], row["decision"], row["error"]) == ("ok", "kept", None), name
        assert row["score_weighted"] == expected.total and row["analysis"] == "结构清楚。"
        assert [row[c] for c in scored] == [by_form["parsed"][c] for c in scored], name
    assert by_form["extra"]["status"] == "parse_error" and "bogus.q1" in by_form["extra"]["error"]
    assert by_form["extra"]["analysis"] == "结构清楚。"  # the object was read: keep its analysis
    assert by_form["prose"]["status"] == "parse_error"
    assert "before the JSON object" in by_form["prose"]["error"]
    assert by_form["not_json"]["status"] == "parse_error"
    assert by_form["not_json"]["analysis"] is None
    assert (by_form["api"]["status"], by_form["api"]["error"]) == ("api_error", "HTTP 500")
    for name in ("extra", "prose", "not_json", "api"):
        assert by_form[name]["decision"] == by_form[name]["status"]
        assert all(by_form[name][c] is None for c in scored[:4]), name
