"""The pairwise stage against the real fake server: designs, order swap, statuses, bias, reruns."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from essaybench.bench.pairwise.design import PairwiseParams, build_pairs
from essaybench.bench.pairwise.prompt import (
    load_pairwise_prompt,
    pairwise_answer_schema,
    render_pairwise_messages,
)
from essaybench.bench.pairwise.run import (
    PairwiseRun,
    VerdictError,
    build_pairwise_requests,
    judge_pairs,
    parse_verdict,
    run_pairwise,
)
from essaybench.bench.pairwise.tables import PAIRWISE_SCHEMA, model_verdict, position_bias
from essaybench.bench.rubrics import RubricError, load_rubric
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.llm.retry import Backoff
from essaybench.llm.session import open_gateway
from tests.helpers import essays
from tests.llm.conftest import fake_spec, registry_of

FAST = Backoff(base_s=0.01, cap_s=0.05)


def verdict(position: str) -> str:
    return json.dumps({"analysis": "两篇各有长短。", "verdict": position}, ensure_ascii=False)


def scripted(**per_judge: Sequence[str]) -> FakeScenario:
    """Each judge answers its structured requests with these replies, in arrival order."""
    return FakeScenario.model_validate({"models": {
        f"{judge}-id": {"structured": "script", "structured_script": list(replies),
                "enforce_max_tokens": False}
        for judge, replies in per_judge.items()}})


def run(base_url: str, store: Path, table: pl.DataFrame, judges: Sequence[str] = ("judge-a",),
        **params: Any) -> PairwiseRun:
    # one connection per judge: requests arrive in request order, so scripts are exact
    registry = registry_of(*(fake_spec(j, model_id=f"{j}-id", max_concurrency=1,
                                       max_reasks=0, max_retries=0) for j in judges))
    with open_gateway(registry, store, list(judges), backoff=FAST,
                      base_urls=dict.fromkeys(judges, base_url)) as session:
        return judge_pairs(table, PairwiseParams(judges=list(judges), **params), session)


@pytest.fixture
def server() -> Iterator[FakeServerHandle]:
    with run_fake_server() as handle:
        yield handle


def dead_url() -> str:
    with socket.socket() as sock:  # a port nobody listens on once the socket is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


# --- prompt, params, pairs (no server) ----------------------------------------------------


def test_prompt_shows_both_essays_the_genre_criteria_and_the_bound() -> None:
    rubric = load_rubric()
    system, user = render_pairwise_messages(rubric, "narrative", "写一件小事。", "甲文。",
                                            "乙文。", 300)
    assert "记叙文" in system["content"]
    text = user["content"]
    assert text.index("写一件小事。") < text.index("甲文。") < text.index("乙文。")
    for trait in rubric.genre("narrative").traits:  # criteria come from the rubric file
        assert trait.name_zh in text and trait.questions[0].text.strip() in text
    assert "300" in text and '"verdict"' in text
    schema = pairwise_answer_schema(300)
    assert schema["properties"]["verdict"]["enum"] == ["A", "B", "tie"]
    assert schema["properties"]["analysis"]["maxLength"] == 300
    assert schema["additionalProperties"] is False


def test_prompt_file_is_validated(tmp_path: Path) -> None:
    source = (Path(__file__).resolve().parents[3] / "rubrics" / "pairwise"
              / "pairwise_judge.v1.yaml")
    good = source.read_text(encoding="utf-8")
    assert load_pairwise_prompt(source).fingerprint == load_pairwise_prompt().fingerprint
    for bad, match in [(good + "extra_key: 1\n", "extra_key"),
                       (good.replace("$essay_b", "$essay_c"), "essay_c"),
                       (good.replace("$answer_example", ""), "answer_example")]:
        path = tmp_path / "p.yaml"
        path.write_text(bad, encoding="utf-8")
        with pytest.raises(RubricError, match=match):
            load_pairwise_prompt(path)


def test_params_are_validated() -> None:
    with pytest.raises(ValueError, match="baseline"):
        PairwiseParams(judges=["j"], design="baseline")
    with pytest.raises(ValueError, match="only used"):
        PairwiseParams(judges=["j"], baseline="m1")
    with pytest.raises(ValueError, match="not among"):
        PairwiseParams(judges=["j"], design="baseline", baseline="x", models=["m1", "m2"])
    with pytest.raises(ValueError, match="twice"):
        PairwiseParams(judges=["j", "j"])
    with pytest.raises(ValueError):
        PairwiseParams(judges=["j"], alpha=3)  # type: ignore[call-arg]
    assert PairwiseParams(judges=["j"]).temperature == 0.2


def test_designs_give_exact_pairs() -> None:
    table = essays(["m3", "m1", "m2"], 2)
    all_pairs = build_pairs(table, PairwiseParams(judges=["j"]))
    assert [(p.prompt_id, p.model_a, p.model_b) for p in all_pairs] == [
        (pid, a, b) for pid in ("p0", "p1") for a, b in (("m1", "m2"), ("m1", "m3"), ("m2", "m3"))]
    base = build_pairs(table, PairwiseParams(judges=["j"], design="baseline", baseline="m2"))
    assert [(p.prompt_id, p.model_a, p.model_b) for p in base] == [
        ("p0", "m1", "m2"), ("p0", "m3", "m2"), ("p1", "m1", "m2"), ("p1", "m3", "m2")]
    chosen = build_pairs(table, PairwiseParams(judges=["j"], models=["m3", "m1"]))
    assert [(p.model_a, p.model_b) for p in chosen] == [("m3", "m1")] * 2
    with pytest.raises(ValueError, match="wrote no essays"):
        build_pairs(table, PairwiseParams(judges=["j"], design="baseline", baseline="m9"))


def test_requests_swap_the_order_and_carry_content_hash_tags() -> None:
    params = PairwiseParams(judges=["j1", "j2"], analysis_max_chars=300, seed=5)
    pairs = build_pairs(essays(["m1", "m2"], 1), params)
    rubric, prompt = load_rubric(), load_pairwise_prompt()
    requests = build_pairwise_requests(pairs, params, rubric, prompt)
    pid = pairs[0].pair_id
    assert [(r.model, r.tag) for r in requests] == [
        ("j1", f"{pid}:AB"), ("j2", f"{pid}:AB"), ("j1", f"{pid}:BA"), ("j2", f"{pid}:BA")]
    ab, ba = requests[0].messages[-1].content, requests[2].messages[-1].content
    assert ab.index("m1写的") < ab.index("m2写的") and ba.index("m2写的") < ba.index("m1写的")
    assert {r.stage for r in requests} == {"pairwise"}
    assert requests[0].response_schema == pairwise_answer_schema(300)
    assert requests[0].params["temperature"] == 0.2 and requests[0].params["max_tokens"] == 2048
    assert requests[0].params["seed"] != requests[2].params["seed"]  # per order, but fixed:
    again = build_pairwise_requests(build_pairs(essays(["m1", "m2"], 1), params), params,
                                    rubric, prompt)
    assert [r.model_dump() for r in again] == [r.model_dump() for r in requests]
    changed = essays(["m1", "m2"], 1).with_columns(pl.col("essay_text") + "！")
    assert build_pairs(changed, params)[0].pair_id != pid  # new essays, new identity


def test_parse_verdict_and_position_mapping() -> None:
    assert parse_verdict(verdict("tie")) == ("tie", "两篇各有长短。")
    assert parse_verdict({"verdict": "B"}) == ("B", None)
    for bad in ('{"verdict": "C"}', "不是JSON", "[1]", '{"analysis": "x"}'):
        with pytest.raises(VerdictError):
            parse_verdict(bad)
    assert [model_verdict(v, "AB") for v in ("A", "B", "tie")] == ["A", "B", "tie"]
    assert [model_verdict(v, "BA") for v in ("A", "B", "tie")] == ["B", "A", "tie"]


@pytest.mark.parametrize(("raw", "why"), [
    (verdict("B") + verdict("A"), "second JSON object"),  # the second used to win
    ('{"analysis": "x", "verdict": "B", "verdict": "A"}', "duplicate key"),
    ("我的结论：" + verdict("A"), "before the JSON object"),
    (verdict("A") + " 以上。", "after the JSON object"),
])
def test_a_verdict_is_exactly_one_object(raw: str, why: str) -> None:
    with pytest.raises(VerdictError, match=why):
        parse_verdict(raw)


def test_a_hostile_verdict_is_a_parse_error_whatever_was_parsed(tmp_path: Path) -> None:
    # No re-asks here (max_reasks 0): the two-object reply is recorded as it came.
    replies = [verdict("B") + verdict("A"), verdict("A")]
    with run_fake_server(scripted(**{"judge-a": replies})) as server:
        out = run(server.base_url, tmp_path, essays(["m1", "m2"], 1))
    assert out.calls["status"].to_list() == ["parse_error", "ok"]
    bad = out.calls.row(0, named=True)
    assert bad["raw_reply"] == replies[0] and bad["verdict"] is None
    assert "second JSON object" in bad["error"]


# --- end to end against the fake server ------------------------------------------------


def test_order_swap_merging(tmp_path: Path) -> None:
    # p0: AB says A, BA says B → model_a both times → A. p1: AB says A, BA says A → conflict.
    replies = [verdict("A"), verdict("B"), verdict("A"), verdict("A")]
    with run_fake_server(scripted(**{"judge-a": replies})) as server:
        out = run(server.base_url, tmp_path, essays(["m1", "m2"], 2))
        assert server.stats().totals.received == 4
    assert out.calls.select("prompt_id", "order", "first_model", "position_verdict",
                            "verdict").rows() == [
        ("p0", "AB", "m1", "A", "A"), ("p0", "BA", "m2", "B", "A"),
        ("p1", "AB", "m1", "A", "A"), ("p1", "BA", "m2", "A", "B")]
    merged = out.merged
    assert merged.select("judge", "prompt_id", "model_a", "model_b", "verdict", "status",
                         "winner", "consistent").rows() == [
        ("judge-a", "p0", "m1", "m2", "A", "ok", "m1", True),
        ("judge-a", "p1", "m1", "m2", "tie", "ok", "tie", False)]
    assert merged.schema == pl.Schema(PAIRWISE_SCHEMA)
    row = merged.row(0, named=True)
    assert row["judge_returned_model"] == "judge-a-id" and row["decision"] == "kept"
    assert row["raw_reply_ab"] == replies[0] and row["analysis_ba"] == "两篇各有长短。"
    assert row["rubric_id"] == "essaybench" and row["template_id"] == "pairwise_judge"


def test_baseline_and_all_pairs_send_exact_counts(server: FakeServerHandle,
                                                  tmp_path: Path) -> None:
    table = essays(["m1", "m2", "m3", "m4"], 2)
    judges = ("judge-a", "judge-b")
    out = run(server.base_url, tmp_path / "all", table, judges)
    assert len(out.pairs) == 2 * 6 and out.merged.height == 2 * 6 * 2
    assert out.calls.height == 2 * 6 * 2 * 2
    assert server.stats().totals.received == 2 * 6 * 2 * 2  # prompts × pairs × orders × judges
    before = server.stats().totals.received
    base = run(server.base_url, tmp_path / "base", table, judges, design="baseline",
               baseline="m1")
    assert server.stats().totals.received - before == 2 * 3 * 2 * 2
    assert set(base.merged["model_b"]) == {"m1"} and base.merged.height == 2 * 3 * 2
    assert set(base.merged["status"]) == {"ok"}
    assert base.merged["verdict"].is_in(["A", "B", "tie"]).all()


def test_parse_error_leaves_no_verdict(tmp_path: Path) -> None:
    # p0: AB ok, BA not JSON; p1: both replies outside the enum. No re-asks (max_reasks 0).
    replies = [verdict("A"), "我觉得A更好", verdict("C"), verdict("C")]
    with run_fake_server(scripted(**{"judge-a": replies})) as server:
        out = run(server.base_url, tmp_path, essays(["m1", "m2"], 2))
    assert out.calls["status"].to_list() == ["ok", "parse_error", "parse_error", "parse_error"]
    bad = out.calls.filter(pl.col("status") == "parse_error")
    assert bad["raw_reply"].to_list() == replies[1:]
    assert bad["verdict"].null_count() == bad["position_verdict"].null_count() == 3
    merged = out.merged
    assert merged["status"].to_list() == ["parse_error", "parse_error"]
    for col in ("verdict", "winner", "consistent"):
        assert merged[col].null_count() == 2, col
    assert merged.row(0, named=True)["error"].startswith("order BA: parse_error")
    assert merged.row(0, named=True)["verdict_ab"] == "A"  # the ok half is kept, not used


def test_endpoint_down_is_api_error_and_a_rerun_sends_only_those(server: FakeServerHandle,
                                                                  tmp_path: Path) -> None:
    table = essays(["m1", "m2"], 2)
    down = run(dead_url(), tmp_path, table)
    assert set(down.calls["status"]) == {"api_error"}
    assert down.calls["error"].null_count() == 0
    assert set(down.merged["status"]) == {"api_error"}
    assert down.merged["verdict"].null_count() == 2 and down.merged["winner"].null_count() == 2
    assert down.merged["decision"].to_list() == ["api_error"] * 2
    up = run(server.base_url, tmp_path, table)  # failures are not in the ledger: sent again
    assert server.stats().totals.received == 4
    assert set(up.merged["status"]) == {"ok"}


def test_failed_or_missing_essay_skips_the_pair(server: FakeServerHandle,
                                                tmp_path: Path) -> None:
    table = essays(["m1", "m2", "m3"], 2, status={("p1", "m2"): "api_error"})
    table = table.filter(~((pl.col("prompt_id") == "p0") & (pl.col("model") == "m3")))
    out = run(server.base_url, tmp_path, table)
    merged = out.merged.select("prompt_id", "model_a", "model_b", "status", "error", "verdict")
    assert merged.rows() == [
        ("p0", "m1", "m2", "ok", None, merged["verdict"][0]),
        ("p0", "m1", "m3", "skipped", "no essay from m3", None),
        ("p0", "m2", "m3", "skipped", "no essay from m3", None),
        ("p1", "m1", "m2", "skipped", "essay of m2 has status api_error: HTTP 500 upstream",
         None),
        ("p1", "m1", "m3", "ok", None, merged["verdict"][4]),
        ("p1", "m2", "m3", "skipped", "essay of m2 has status api_error: HTTP 500 upstream",
         None)]
    assert server.stats().totals.received == 2 * 2  # two sendable pairs × two orders
    skipped = out.calls.filter(pl.col("status") == "skipped")
    assert skipped.height == 4 * 2 and skipped["raw_reply"].null_count() == 8


def test_position_bias_matches_hand_counts(tmp_path: Path) -> None:
    # judge-a, position verdicts (AB, BA) per prompt:
    #   p0 (A, B): model A, A → agree       first wins 1, second wins 1
    #   p1 (A, A): model A, B → flip        first wins 2
    #   p2 (tie, A): model tie, B → flip    tie 1, first wins 1
    #   p3 (B, A): model B, B → agree       second wins 1, first wins 1
    #   p4 (A, parse error): not a fully-ok pair; its ok call is a first-position win
    # → pairs_ok 4, flips 2 (0.5); ok calls 9: first 6, second 2, ties 1 → 6/8 = 0.75.
    # judge-b always says "A": every ok pair flips, every call is a first-position win.
    a = [verdict(v) for v in ("A", "B", "A", "A", "tie", "A", "B", "A", "A")] + ["坏"]
    with run_fake_server(scripted(**{"judge-a": a, "judge-b": [verdict("A")]})) as server:
        out = run(server.base_url, tmp_path, essays(["m1", "m2"], 5), ("judge-a", "judge-b"))
    merged_a = out.merged.filter(pl.col("judge") == "judge-a")
    assert merged_a["verdict"].to_list() == ["A", "tie", "tie", "B", None]
    assert merged_a["consistent"].to_list() == [True, False, False, True, None]
    bias = {row["judge"]: row for row in position_bias(out.merged).iter_rows(named=True)}
    assert bias["judge-a"] == {
        "judge": "judge-a", "pairs_ok": 4, "swap_flips": 2, "swap_flip_rate": 0.5,
        "calls_ok": 9, "first_wins": 6, "second_wins": 2, "ties": 1,
        "first_position_win_rate": 0.75}
    assert bias["judge-b"] == {
        "judge": "judge-b", "pairs_ok": 5, "swap_flips": 5, "swap_flip_rate": 1.0,
        "calls_ok": 10, "first_wins": 10, "second_wins": 0, "ties": 0,
        "first_position_win_rate": 1.0}


def test_position_bias_has_no_rate_without_data() -> None:
    merged = pl.DataFrame({"judge": ["j"], "status_ab": ["api_error"], "status_ba": ["ok"],
                           "verdict_ab": [None], "verdict_ba": ["tie"],
                           "position_verdict_ab": [None], "position_verdict_ba": ["tie"]})
    row = position_bias(merged).row(0, named=True)
    assert row["pairs_ok"] == 0 and row["swap_flip_rate"] is None
    assert row["ties"] == 1 and row["first_position_win_rate"] is None  # never a made-up 0


def test_rerun_through_the_ledger_sends_nothing(server: FakeServerHandle, tmp_path: Path) -> None:
    table = essays(["m1", "m2", "m3"], 2, status={("p0", "m3"): "refused"})
    first = run(server.base_url, tmp_path, table, ("judge-a", "judge-b"))
    sent = server.stats().totals.received
    assert sent == (3 + 1) * 2 * 2
    again = run(server.base_url, tmp_path, table, ("judge-a", "judge-b"))
    assert server.stats().totals.received == sent  # nothing paid twice
    assert again.calls.filter(pl.col("status") == "ok")["from_ledger"].all()
    keep = ["judge", "prompt_id", "model_a", "model_b", "verdict", "status", "call_key_ab",
            "call_key_ba", "raw_reply_ab", "raw_reply_ba"]
    assert again.merged.select(keep).equals(first.merged.select(keep))


def test_run_pairwise_output_and_meta(server: FakeServerHandle, tmp_path: Path) -> None:
    registry = registry_of(fake_spec("judge-a", model_id="a-id"))
    params = PairwiseParams(judges=["judge-a"], design="baseline", baseline="m1",
                            analysis_max_chars=300)
    table = essays(["m1", "m2", "m3"], 2, status={("p1", "m3"): "truncated"})
    with open_gateway(registry, tmp_path, ["judge-a"], backoff=FAST,
                      base_urls={"judge-a": server.base_url}) as session:
        out = run_pairwise(table, params, session)
    assert out.table.height == 4 and out.counts() == {"kept": 3, "skipped": 1}
    assert out.meta["counts"] == {"judge-a": {"ok": 3, "skipped": 1}}
    assert out.meta["requests"] == 6 and out.meta["pairs"] == 4
    assert out.meta["design"] == "baseline" and out.meta["baseline"] == "m1"
    assert out.meta["template_id"] == "pairwise_judge"
    [bias] = out.meta["position_bias"]
    assert bias["judge"] == "judge-a" and bias["pairs_ok"] == 3 and bias["calls_ok"] == 6
