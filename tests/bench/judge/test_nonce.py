"""The default judge prompt (v2) asks each call for its nonce; a reply that does not echo
it is no judgment of that call (a verdict copied from the essay cannot carry it). And
essays marked off-language are not judged when the config says so."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from essaybench.bench.judge.judgments import judgments_table, run_judge
from essaybench.bench.judge.render import JudgeRenderer
from essaybench.bench.judge.request import JudgeParams, build_judge_requests, make_renderer
from essaybench.bench.rubrics import load_rubric
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.session import open_gateway
from essaybench.llm.types import CallStatus, ChatResult
from tests.llm.conftest import fake_spec, registry_of

RUBRIC = load_rubric()


def essays(off_language: list[bool] | None = None) -> pl.DataFrame:
    table = pl.DataFrame({
        "prompt_id": ["p0", "p1"], "model": ["w", "w"], "sample_index": [0, 0],
        "genre": ["narrative", "argumentative"], "prompt_set": ["open", "open"],
        "prompt_text": ["写一件难忘的事。", "谈谈坚持。"],
        "essay_text": ["那年夏天，我学会了游泳。", "坚持是成功的阶梯。"], "status": ["ok", "ok"]})
    if off_language is not None:
        table = table.with_columns(pl.Series("off_language", off_language))
    return table


def answer(genre: str, nonce: str | None) -> str:
    obj = {"analysis": "清楚。", "scores": dict.fromkeys(RUBRIC.question_ids(genre), 7)}
    return json.dumps({**({"nonce": nonce} if nonce is not None else {}), **obj},
                      ensure_ascii=False)


def result(key: str, text: str) -> ChatResult:
    return ChatResult(key=key, model="j", status=CallStatus.OK, text=text)


def test_the_default_prompt_asks_for_a_nonce_and_the_fake_judge_echoes_it(
        tmp_path: Path) -> None:
    params = JudgeParams(judges=["j"])
    assert make_renderer(params, RUBRIC).uses_nonce
    with run_fake_server() as server, open_gateway(
            registry_of(fake_spec("j")), tmp_path, ["j"],
            base_urls={"j": server.base_url}) as session:
        table = run_judge(essays(), params, session).table
    assert table["status"].to_list() == ["ok", "ok"]
    assert all(json.loads(r)["nonce"] for r in table["raw_reply"])


def test_a_reply_without_the_calls_nonce_is_no_judgment() -> None:
    """As a ledger row or a provider without schema enforcement would hand it over."""
    params = JudgeParams(judges=["j"])
    table = essays()
    requests = build_judge_requests(table, params, RUBRIC)
    renderer: JudgeRenderer = make_renderer(params, RUBRIC)
    right = renderer.expected_nonce("narrative", "写一件难忘的事。", "那年夏天，我学会了游泳。")
    results = [result("k0", answer("narrative", right)),  # echoes its own call's nonce
               result("k1", answer("argumentative", right))]  # another call's nonce
    judged = judgments_table(table, requests, results, RUBRIC, params)
    assert judged["status"].to_list() == ["ok", "parse_error"]
    assert "does not echo the call's nonce (a different value)" in judged["error"][1]
    copied = judgments_table(table, requests, [result("k0", answer("narrative", None)),
                                               result("k1", answer("argumentative", None))],
                             RUBRIC, params)
    assert copied["status"].to_list() == ["parse_error", "parse_error"]
    assert "none given" in copied["error"][0] and copied["score_weighted"].null_count() == 2


def test_off_language_essays_are_skipped_when_configured(tmp_path: Path) -> None:
    params = JudgeParams(judges=["j"], skip_off_language=True)
    table = essays([True, False])
    assert [r.tag for r in build_judge_requests(table, params, RUBRIC)] == ["p1#w#0"]
    with run_fake_server() as server, open_gateway(
            registry_of(fake_spec("j")), tmp_path, ["j"],
            base_urls={"j": server.base_url}) as session:
        judged = run_judge(table, params, session).table
        assert server.stats().totals.received == 1
    assert judged["status"].to_list() == ["skipped", "ok"]
    assert judged["error_kind"][0] == "essay_off_language"
    # Off by default: the essay is judged (and its off_language flag stays for the reports).
    assert len(build_judge_requests(table, JudgeParams(judges=["j"]), RUBRIC)) == 2
