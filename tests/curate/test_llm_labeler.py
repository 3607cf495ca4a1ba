"""GatewayLabeler against the real fake OpenAI server: labels, failures, the ledger, classify."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from essaybench.core.hashing import prompt_id
from essaybench.curate.classify import ClassifyParams, run_classify
from essaybench.curate.label_budget import answer_max_tokens
from essaybench.curate.labeler import (
    Genre,
    LabelRequest,
    LabelResult,
    LabelStatus,
    PromptSetLabel,
    load_label_template,
    parse_label_reply,
    render_label_prompt,
)
from essaybench.curate.llm_labeler import GatewayLabeler, label_schema, meaningful_evidence
from essaybench.curate.table import FILTER_COLUMNS, RECORD_COLUMNS
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.llm.gateway import Gateway
from essaybench.llm.ledger import Ledger
from essaybench.llm.retry import Backoff
from essaybench.llm.structured import StructuredError, validate
from tests.llm.conftest import fake_spec, registry_of

FAST = Backoff(base_s=0.01, cap_s=0.05)
GENRE = LabelRequest(prompt_id="p-genre", text="以“门”为题写一篇作文。")
SET = LabelRequest(prompt_id="p-set", text="写一篇议论文，谈谈诚信。", need_genre=False,
                   need_set=True)
BOTH = LabelRequest(prompt_id="p-both", text="以“门”为题写一篇作文，写给你的老师。",
                    need_set=True)


def reply(genre: str | list[str] | None = None, pset: str | None = None,
          evidence: str = "写一篇作文", essay: str | None = None) -> str:
    # the default evidence is a passage of GENRE and BOTH; the default template (v3) has the
    # essay key, null where the request does not ask it
    return json.dumps({"essay": essay, "genre": genre, "prompt_set": pset,
                       "evidence": evidence}, ensure_ascii=False)


def scripted(*replies: str, **model: Any) -> FakeScenario:
    return FakeScenario.model_validate(
        {"models": {"*": {"structured": "script", "structured_script": list(replies), **model}}})


def with_faults(*faults: dict[str, Any]) -> FakeScenario:
    return FakeScenario.model_validate({"faults": list(faults)})


def label_with(server: FakeServerHandle, ledger_path: Path, requests: list[LabelRequest], *,
               batch: bool = False, **spec: Any) -> list[LabelResult]:
    async def main() -> list[LabelResult]:
        with Ledger(ledger_path) as ledger:
            gateway = Gateway(registry_of(fake_spec(**spec)), ledger,
                              base_urls={"fake": server.base_url}, backoff=FAST, seed=0)
            labeler = GatewayLabeler(gateway, "fake")
            try:
                if batch:
                    return await labeler.label_many(requests)
                return list(await asyncio.gather(*(labeler.label(r) for r in requests)))
            finally:
                await gateway.aclose()
    return asyncio.run(main())


def ledger_rows(path: Path, columns: str = "stage, tag, status, attempts") -> list[tuple[Any, ...]]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(f"select {columns} from llm_calls order by tag").fetchall()


# --- the answer schema -----------------------------------------------------------------

def _walk(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [*node, *(k for v in node.values() for k in _walk(v))]
    if isinstance(node, list):
        return [k for v in node for k in _walk(v)]
    return []


def test_schema_asks_only_the_requested_labels_with_enums() -> None:
    schema = label_schema(GENRE)
    assert schema["required"] == ["genre", "prompt_set", "evidence"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["genre"]["enum"] == [*(g.value for g in Genre), None]
    assert schema["properties"]["prompt_set"] == {"type": "null"}  # not asked: pinned to null
    assert schema["properties"]["evidence"]["maxLength"] <= 200
    assert label_schema(SET)["properties"]["genre"] == {"type": "null"}
    assert label_schema(BOTH)["properties"]["prompt_set"]["enum"] == ["open", "constrained", None]
    # numeric bounds are ignored by llama.cpp grammars, so none may carry meaning here
    assert not {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} & {
        k for r in (GENRE, SET, BOTH) for k in _walk(label_schema(r))}


def test_schema_accepts_what_the_template_asks_for_and_rejects_other_labels() -> None:
    # the rendered answer line writes "prompt_set": null when the set is not asked
    schema = label_schema(GENRE, essay_key=True)
    validate(json.loads(reply("narrative", None)), schema)
    validate(json.loads(reply(None, None)), schema)  # declining is well-formed
    for bad in (reply("poem"), reply("narrative", "open"), reply("narrative", essay="essay"),
                '{"essay": null, "genre": "narrative", "evidence": "x"}',
                '{"essay": null, "genre": "narrative", "prompt_set": null, "evidence": "x", '
                '"extra": 1}'):
        with pytest.raises(StructuredError):
            validate(json.loads(bad), schema)
    asked = label_schema(GENRE.model_copy(update={"need_essay": True}))
    for good in (reply("narrative", essay="essay"), reply("any", essay="essay"),
                 reply(["argumentative", "narrative"], essay="essay"),
                 reply(None, essay="not_essay"), reply(None, essay="unsure")):
        validate(json.loads(good), asked)
    for bad in (reply(["narrative"], essay="essay"), reply("narrative", essay="maybe"),
                reply(["any", "narrative"], essay="essay")):
        with pytest.raises(StructuredError):
            validate(json.loads(bad), asked)


# --- answers ---------------------------------------------------------------------------

@pytest.mark.parametrize(("request_", "text", "genre", "pset"), [
    (GENRE, reply("narrative", evidence="以“门”为题"), Genre.NARRATIVE, None),
    (SET, reply(None, "constrained", evidence="谈谈诚信"), None, PromptSetLabel.CONSTRAINED),
    (BOTH, reply("descriptive", "constrained", evidence="写给你的老师"), Genre.DESCRIPTIVE,
     PromptSetLabel.CONSTRAINED),
])
def test_ok_reply_becomes_labels(tmp_path: Path, request_: LabelRequest, text: str,
                                 genre: Genre | None, pset: PromptSetLabel | None) -> None:
    with run_fake_server(scripted(text)) as server:
        (result,) = label_with(server, tmp_path / "l.duckdb", [request_])
    assert result == LabelResult(status=LabelStatus.OK, genre=genre, prompt_set=pset,
                                 evidence=json.loads(text)["evidence"])
    ((stage, tag, status, attempts),) = ledger_rows(tmp_path / "l.duckdb")
    assert (stage, tag, status, attempts) == ("classify", request_.prompt_id, "ok", 1)


def test_request_carries_template_schema_and_params(tmp_path: Path) -> None:
    with run_fake_server(scripted(reply("narrative"))) as server:
        label_with(server, tmp_path / "l.duckdb", [GENRE])
    ((raw,),) = ledger_rows(tmp_path / "l.duckdb", "request")
    request = json.loads(raw)
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    assert GENRE.text in request["messages"][1]["content"]
    budget = answer_max_tokens(label_schema(GENRE.model_copy(update={
        "need_set": True, "need_essay": True}), essay_key=True), "fake")
    assert request["params"] == {"max_tokens": budget, "temperature": 0.0}
    assert request["schema"] == label_schema(GENRE, essay_key=True)


def test_model_declining_is_refused_without_a_label(tmp_path: Path) -> None:
    with run_fake_server(scripted(reply(None, evidence="不是作文题"))) as server:
        (result,) = label_with(server, tmp_path / "l.duckdb", [GENRE])
    assert (result.status, result.genre) == (LabelStatus.REFUSED, None)
    assert "不是作文题" in (result.error or "")


@pytest.mark.parametrize("first", ["好的，这是一篇记叙文。", reply("poem")])
def test_invalid_reply_is_reasked_inside_the_gateway(tmp_path: Path, first: str) -> None:
    # the re-ask is a new body, so the script hands it the second reply
    with run_fake_server(scripted(first, reply("expository"))) as server:
        (result,) = label_with(server, tmp_path / "l.duckdb", [GENRE])
        assert server.stats().totals.received == 2
    assert (result.status, result.genre) == (LabelStatus.OK, Genre.EXPOSITORY)
    assert ledger_rows(tmp_path / "l.duckdb") == [("classify", "p-genre", "ok", 2)]


# --- failures never become labels --------------------------------------------------------

@pytest.mark.parametrize(("scenario", "status", "in_error"), [
    (with_faults({"kind": "invalid_structured", "variant": "not_json"}),
     LabelStatus.PARSE_ERROR, "reply: '好的"),
    (with_faults({"kind": "invalid_structured"}), LabelStatus.PARSE_ERROR, "reply: '{"),
    (with_faults({"kind": "finish_reason", "finish_reason": "length"}),
     LabelStatus.PARSE_ERROR, "truncated"),
    (with_faults({"kind": "status", "status": 400, "message": "bad request body"}),
     LabelStatus.API_ERROR, "bad request body"),
    (with_faults({"kind": "finish_reason", "finish_reason": "content_filter"}),
     LabelStatus.REFUSED, "content filter"),
])
def test_failed_call_yields_no_label(tmp_path: Path, scenario: FakeScenario,
                                     status: LabelStatus, in_error: str) -> None:
    with run_fake_server(scenario) as server:
        (result,) = label_with(server, tmp_path / "l.duckdb", [BOTH])
    assert result.status == status
    assert (result.genre, result.prompt_set) == (None, None)
    assert in_error in (result.error or "")


def test_always_invalid_stops_after_the_reask_budget(tmp_path: Path) -> None:
    with run_fake_server(with_faults({"kind": "invalid_structured"})) as server:
        (result,) = label_with(server, tmp_path / "l.duckdb", [GENRE], max_reasks=2)
        assert server.stats().totals.received == 3
    assert result.status == LabelStatus.PARSE_ERROR
    assert ledger_rows(tmp_path / "l.duckdb") == [("classify", "p-genre", "parse_error", 3)]


# --- strict replies and quoted evidence (issue 13) ---------------------------------------

def template_placeholder(request: LabelRequest) -> str:
    """The evidence text the default template's answer line shows, as a model copies it."""
    rendered = render_label_prompt(load_label_template(), request).user
    line = next(x for x in rendered.splitlines() if '"evidence": "' in x)
    return line.split('"evidence": "', 1)[1].rsplit('"', 1)[0]


@pytest.mark.parametrize("evidence", [
    "<题目中支持判断的原文或简短理由 / a short quote or reason>",  # the v1 template's
    "‹题目中支持判断的原文…›",  # as the issue quotes it
    "TEMPLATE",  # the default template's own placeholder, whatever it is now
    "题目要求写一段经历",  # a reason, not a quote
    "",
])
def test_evidence_that_is_not_a_quote_from_the_prompt_is_no_label(
        tmp_path: Path, evidence: str) -> None:
    evidence = template_placeholder(GENRE) if evidence == "TEMPLATE" else evidence
    assert evidence not in GENRE.text or not evidence
    with run_fake_server(scripted(reply("argumentative", evidence=evidence))) as server:
        (result,) = label_with(server, tmp_path / "l.duckdb", [GENRE])
    assert (result.status, result.genre, result.prompt_set) == (
        LabelStatus.PARSE_ERROR, None, None)
    assert "evidence" in (result.error or "")


@pytest.mark.parametrize("evidence", ["门", "“门”", "写", "600", "“600”", "一篇", "600字"])
def test_evidence_that_shows_nothing_is_no_label(tmp_path: Path, evidence: str) -> None:
    """Issue 25, item 16: one character, or only digits, passed as a passage of the prompt."""
    prompt = LabelRequest(prompt_id="p-600", text="以“门”为题写一篇作文，不少于600字。")
    with run_fake_server(scripted(reply("narrative", evidence=evidence))) as server:
        (result,) = label_with(server, tmp_path / "l.duckdb", [prompt])
    assert (result.status, result.genre) == (LabelStatus.PARSE_ERROR, None)
    assert "shows nothing" in (result.error or ""), result.error


@pytest.mark.parametrize("evidence", ["写一篇作文", "不少于600字", "“记叙文写作”"])
def test_four_letters_are_evidence(evidence: str) -> None:
    assert meaningful_evidence(evidence)
    assert not meaningful_evidence("600字") and not meaningful_evidence("“门”")


@pytest.mark.parametrize("evidence", ["经历", "“记叙文”", "流"])
def test_a_short_cue_alone_is_no_evidence(evidence: str) -> None:
    """Issue 30, item 3: at least four characters; a two- or three-letter cue passed."""
    assert not meaningful_evidence(evidence)


@pytest.mark.parametrize("evidence", ["以“门”为题", "  写一篇作文。 ", "以“门”为题写一篇作文。",
                                      "以\u201c门\u201d为题写一篇\u200b作文"])
def test_evidence_quoted_from_the_prompt_is_accepted(tmp_path: Path, evidence: str) -> None:
    # compared after the normalisation the prompt had (whitespace, zero-width characters)
    with run_fake_server(scripted(reply("narrative", evidence=evidence))) as server:
        (result,) = label_with(server, tmp_path / "l.duckdb", [GENRE])
    assert (result.status, result.genre) == (LabelStatus.OK, Genre.NARRATIVE)


@pytest.mark.parametrize("text", [
    # a duplicated key: the last value used to win
    '{"genre": "narrative", "prompt_set": null, "evidence": "以“门”为题", '
    '"genre": "argumentative"}',
    # two objects: the gateway used to take the last, the labeler the span of both
    reply("narrative", evidence="以“门”为题") + reply("argumentative", evidence="以“门”为题"),
    # an object inside prose
    "判断如下：" + reply("narrative", evidence="以“门”为题"),
])
def test_a_reply_that_is_not_exactly_one_object_is_no_label(tmp_path: Path, text: str) -> None:
    with run_fake_server(scripted(text)) as server:
        (result,) = label_with(server, tmp_path / "l.duckdb", [GENRE], max_reasks=1)
        assert server.stats().totals.received == 2  # re-asked once, the same reply again
    assert (result.status, result.genre) == (LabelStatus.PARSE_ERROR, None)
    assert ledger_rows(tmp_path / "l.duckdb", "status, attempts, reasks, retries") == [
        ("parse_error", 2, 1, 0)]


def test_placeholder_evidence_leaves_the_prompt_unclassified(tmp_path: Path) -> None:
    text = "以“门”为题写一篇作文。"
    placeholder = template_placeholder(LabelRequest(prompt_id="x", text=text))
    answer = reply("argumentative", evidence=placeholder, essay="essay")
    with run_fake_server(scripted(answer)) as server, Ledger(tmp_path / "l.duckdb") as ledger:
        gateway = Gateway(registry_of(fake_spec()), ledger,
                          base_urls={"fake": server.base_url}, backoff=FAST)
        out = run_classify(prompt_table([text]), ClassifyParams(mode="rules+llm"),
                           GatewayLabeler(gateway, "fake"))
    row = out.table.row(0, named=True)
    assert (row["genre"], row["genre_source"], row["decision"]) == (None, None, "unclassified")
    assert "evidence" in row["detail"] and out.meta["llm"]["status"] == {"parse_error": 1}


# --- the ledger ------------------------------------------------------------------------

def test_rerun_is_served_from_the_ledger(tmp_path: Path) -> None:
    requests = [GENRE, SET, BOTH]
    with run_fake_server() as server:  # replies generated from the schema
        first = label_with(server, tmp_path / "l.duckdb", requests)
        received = server.stats().totals.received
        again = label_with(server, tmp_path / "l.duckdb", requests)
        batched = label_with(server, tmp_path / "l.duckdb", requests, batch=True)
        assert server.stats().totals.received == received == 3
    assert again == batched == first
    assert len(ledger_rows(tmp_path / "l.duckdb")) == 3


def test_schema_generated_replies_always_parse(tmp_path: Path) -> None:
    # any reply the schema allows is read by parse_label_reply as a label or a refusal;
    # the fake's random evidence is no passage of the prompt, so its labels are rejected
    # for that reason and no other
    requests = [LabelRequest(prompt_id=f"p{i}", text=f"第{i}题：以“门”为题写作文。",
                             need_genre=i % 3 != 1, need_set=i % 3 != 0) for i in range(30)]
    with run_fake_server() as server:
        results = label_with(server, tmp_path / "l.duckdb", requests, batch=True)
    assert {r.status for r in results} == {LabelStatus.PARSE_ERROR, LabelStatus.REFUSED}
    assert sum(r.status == LabelStatus.PARSE_ERROR for r in results) >= 10
    for r in results:
        assert (r.genre, r.prompt_set) == (None, None)
        if r.status == LabelStatus.PARSE_ERROR:
            assert "is not a passage of the prompt" in (r.error or "")


def test_parse_label_reply_is_the_reader(tmp_path: Path) -> None:
    # Chinese label names are the parser's business; the schema's enum keeps them out,
    # so the gateway re-asks rather than the labeler accepting a second answer format
    assert parse_label_reply(reply("记叙文"), GENRE).genre == Genre.NARRATIVE
    with run_fake_server(scripted(reply("记叙文"), reply("narrative"))) as server:
        (result,) = label_with(server, tmp_path / "l.duckdb", [GENRE])
    assert result.genre == Genre.NARRATIVE
    assert ledger_rows(tmp_path / "l.duckdb")[0][3] == 2


# --- classify ---------------------------------------------------------------------------

def prompt_table(texts: list[str]) -> pl.DataFrame:
    n = len(texts)
    data: dict[str, list[str | None]] = {c: [None] * n for c in RECORD_COLUMNS}
    data.update(record_id=[f"r{i}" for i in range(n)], source=["test"] * n,
                raw_text=list(texts), decision=["kept"] * n, text=list(texts),
                prompt_id=[prompt_id(t) for t in texts])
    return pl.DataFrame(data, schema={**RECORD_COLUMNS, **FILTER_COLUMNS})


def test_run_classify_with_gateway_labeler(tmp_path: Path) -> None:
    undecided = ["以“门”为题写一篇作文。", "以“桥”为题写一篇作文。", "以“远方”为题写一篇作文。"]
    decided = "以“底线”为题，写一篇议论文。"
    t = prompt_table([undecided[0], decided, *undecided[1:]])
    path = tmp_path / "l.duckdb"
    answer = reply("narrative", evidence="为题写一篇作文", essay="essay")
    with run_fake_server(scripted(answer)) as server, \
            Ledger(path) as ledger:
        gateway = Gateway(registry_of(fake_spec()), ledger,
                          base_urls={"fake": server.base_url}, backoff=FAST)
        labeler = GatewayLabeler(gateway, "fake")
        out = run_classify(t, ClassifyParams(mode="rules+llm"), labeler)
        assert server.stats().totals.received == 3
        assert labeler.batches == 1  # the gathered label() calls went out as one batch
        # the same labeler on a new event loop: one new prompt sent, the rest from the ledger
        again = run_classify(prompt_table([*undecided, "以“雨”为题写一篇作文。"]),
                             ClassifyParams(mode="rules+llm"), labeler)
        assert server.stats().totals.received == 4
    rows = out.table.to_dicts()
    llm = [r for r in rows if r["text"] in undecided]
    assert [(r["genre"], r["genre_source"], r["decision"]) for r in llm] == [
        ("narrative", "llm", "kept")] * 3
    assert all(r["genre_evidence"].startswith("llm: 为题写一篇作文 | rule: undecided")
               for r in llm)
    assert next(r for r in rows if r["text"] == decided)["genre_source"] == "rule"
    assert out.meta["llm"]["status"] == {"ok": 3}
    assert again.table["genre_source"].to_list() == ["llm"] * 4
    assert sorted(ledger_rows(path, "stage, tag")) == sorted(
        ("classify", prompt_id(text)) for text in [*undecided, "以“雨”为题写一篇作文。"])


def test_concurrent_calls_never_overlap_gateway_batches(tmp_path: Path) -> None:
    # Gateway.run closes its HTTP clients when a batch ends: overlapping batches on one
    # gateway fail with "client has been closed". More calls than the endpoint's slots,
    # with latency, arriving both gathered and while a batch is in flight.
    requests = [LabelRequest(prompt_id=f"p{i}", text=f"以“门{i}”为题写一篇作文。")
                for i in range(40)]
    scenario = FakeScenario.model_validate({"models": {"*": {"latency_ms": 20}}})

    async def main(server: FakeServerHandle) -> tuple[list[LabelResult], int]:
        with Ledger(tmp_path / "l.duckdb") as ledger:
            gateway = Gateway(registry_of(fake_spec(max_concurrency=4)), ledger,
                              base_urls={"fake": server.base_url}, backoff=FAST)
            labeler = GatewayLabeler(gateway, "fake")

            async def late(r: LabelRequest) -> LabelResult:
                await asyncio.sleep(0.03)  # arrives while the first batch is in flight
                return await labeler.label(r)

            async def many() -> list[LabelResult]:
                return await labeler.label_many(requests[:20])

            batch = asyncio.ensure_future(many())
            singles = await asyncio.gather(*(labeler.label(r) for r in requests[20:30]),
                                           *(late(r) for r in requests[30:]))
            return [*await batch, *singles], labeler.batches

    with run_fake_server(scenario) as server:
        results, batches = asyncio.run(main(server))
        assert server.stats().totals.received == 40
    # the fake's generated evidence is no quote: parse errors, never labels
    assert {r.status for r in results} <= {LabelStatus.PARSE_ERROR, LabelStatus.REFUSED}
    assert all(r.genre is None for r in results)
    assert batches == 2


def test_a_template_before_v3_is_not_asked_whether_it_is_an_essay(tmp_path: Path) -> None:
    v2 = load_label_template(Path(__file__).resolve().parents[2] / "rubrics" / "classify"
                             / "classify_prompt.v2.yaml")
    asked = GENRE.model_copy(update={"need_essay": True})
    with Ledger(tmp_path / "l.duckdb") as ledger:
        gateway = Gateway(registry_of(fake_spec()), ledger, base_urls={"fake": "http://x"})
        old = GatewayLabeler(gateway, "fake", template=v2).chat_request(asked)
        new = GatewayLabeler(gateway, "fake").chat_request(asked)
    assert "essay" not in (old.response_schema or {})["properties"]
    assert "是否作文" not in old.messages[1].content
    assert (new.response_schema or {})["properties"]["essay"]["enum"] == [
        "essay", "not_essay", "unsure", None]
