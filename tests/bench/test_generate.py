"""The generation stage against the real fake server: every call a row, nothing paid twice."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest
from pydantic import ValidationError

from essaybench.bench.generate import (
    ESSAY_COLUMNS,
    GenerateParams,
    build_requests,
    essays_table,
    run_generate,
    sample_seed,
    system_prompts,
)
from essaybench.core.contracts import StageOutput
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.llm.registry import Registry
from essaybench.llm.retry import Backoff
from essaybench.llm.session import open_gateway
from tests.llm.conftest import fake_spec, registry_of

FAST = Backoff(base_s=0.01, cap_s=0.05)
VERSION = "ps-test-0001"
MODELS = ("model-a", "model-b")


def _prompts() -> pl.DataFrame:
    return pl.DataFrame({
        "prompt_id": ["p000000000000001", "p000000000000002"],
        "text": ["以“坚持”为题，写一篇议论文。", "描写你家乡的秋天，不少于600字。"],
        "genre": ["argumentative", "descriptive"],
        "prompt_set": ["open", "constrained"],
    })


def _registry() -> Registry:
    return registry_of(fake_spec("model-a", model_id="gpt-a", max_retries=0),
                       fake_spec("model-b", model_id="gpt-b", max_retries=0))


def _run(server: FakeServerHandle, store: Path, params: GenerateParams) -> StageOutput:
    with open_gateway(_registry(), store, list(params.models),
                      base_urls={m: server.base_url for m in params.models},
                      backoff=FAST) as session:
        return run_generate(_prompts(), params, session, VERSION)


def test_requests_send_the_prompt_verbatim_with_reproducible_seeds() -> None:
    params = GenerateParams(models=MODELS, samples=2, seed_base=7)
    requests = build_requests(_prompts(), params)
    assert len(requests) == 8
    assert {r.stage for r in requests} == {"generate"}
    first = requests[0]
    assert [m.role for m in first.messages] == ["user"]
    assert first.messages[0].content == _prompts()["text"][0]
    assert first.tag == "p000000000000001#0" and first.params["temperature"] == 0.8
    assert "max_tokens" not in first.params  # the registry default applies
    seeds = {(r.tag, r.model): r.params["seed"] for r in requests}
    # Different samples differ; the same sample gets the same seed for every model.
    assert seeds[("p000000000000001#0", "model-a")] != seeds[("p000000000000001#1", "model-a")]
    assert seeds[("p000000000000001#1", "model-a")] == seeds[("p000000000000001#1", "model-b")]
    assert len(set(seeds.values())) == 4
    again = build_requests(_prompts(), params)
    assert [r.params for r in again] == [r.params for r in requests]
    other_base = build_requests(_prompts(), GenerateParams(models=MODELS, samples=2, seed_base=8))
    assert [r.params["seed"] for r in other_base] != [r.params["seed"] for r in requests]
    assert sample_seed(7, "p000000000000001", 0) == first.params["seed"]


def test_system_prompt_and_max_tokens_are_opt_in() -> None:
    params = GenerateParams(models=("model-a",), system_prompt="你是作家。", max_tokens=900)
    (request, _) = build_requests(_prompts(), params)
    assert [m.role for m in request.messages] == ["system", "user"]
    assert request.params["max_tokens"] == 900


def test_a_writer_configuration_sends_its_own_system_prompt() -> None:
    """A registry entry's writer_system_prompt replaces the run's for that writer only;
    the other writer keeps the run's (here none: the prompt alone)."""
    specs = {"model-a": fake_spec("model-a", model_id="gpt-a"),
             "model-b": fake_spec("model-b", model_id="gpt-a",
                                  writer_system_prompt="请用简体中文写作。")}
    requests = build_requests(_prompts(), GenerateParams(models=MODELS), specs)
    by_model = {r.model: r for r in requests if r.tag == "p000000000000001#0"}
    assert [m.role for m in by_model["model-a"].messages] == ["user"]
    system, _ = by_model["model-b"].messages
    assert (system.role, system.content) == ("system", "请用简体中文写作。")
    assert system_prompts(GenerateParams(models=MODELS, system_prompt="run"), specs) == {
        "model-a": "run", "model-b": "请用简体中文写作。"}


def test_params_are_validated() -> None:
    with pytest.raises(ValidationError):
        GenerateParams(models=())
    with pytest.raises(ValidationError):
        GenerateParams(models=("a", "a"))
    with pytest.raises(ValidationError):
        GenerateParams(models=("a",), samples=0)
    with pytest.raises(ValidationError):
        GenerateParams(models=("a",), extra=1)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="prompt_id not unique"):
        build_requests(pl.concat([_prompts(), _prompts()]), GenerateParams(models=("a",)))


def test_two_prompts_two_models_two_samples(tmp_path: Path) -> None:
    scenario = FakeScenario.model_validate(
        {"models": {"gpt-a": {"returned_model": "gpt-a-2025-01-01"}, "*": {}}})
    params = GenerateParams(models=MODELS, samples=2)
    with run_fake_server(scenario) as server:
        out = _run(server, tmp_path, params)
        assert server.stats().totals.received == 8
    table = out.table
    assert table.columns == list(ESSAY_COLUMNS)
    assert table.height == 8
    assert table["status"].to_list() == ["ok"] * 8
    assert table["essay_text"].null_count() == 0
    assert (table["essay_text"] == table["raw_text"]).all()
    assert set(table["prompt_set_version"]) == {VERSION}
    assert table.group_by("prompt_id", "model", "sample_index").len().height == 8
    a = table.filter(pl.col("model") == "model-a")
    b = table.filter(pl.col("model") == "model-b")
    assert set(a["model_id"]) == {"gpt-a"} and set(a["returned_model"]) == {"gpt-a-2025-01-01"}
    assert set(b["model_id"]) == {"gpt-b"} and set(b["returned_model"]) == {"gpt-b"}
    params_sent = [json.loads(p) for p in table["params"]]
    assert all(p["temperature"] == 0.8 and p["max_tokens"] == 256 for p in params_sent)
    assert len({(row["prompt_id"], p["seed"]) for row, p
                in zip(table.iter_rows(named=True), params_sent, strict=True)}) == 4
    assert table["request_key"].n_unique() == 8
    assert not table["from_ledger"].any()
    assert (table["output_tokens"] > 0).all() and (table["cost_usd"] > 0).all()
    stamp = datetime.fromisoformat(str(table["generated_at"][0]))
    assert stamp.utcoffset() is not None and stamp.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    assert out.meta["counts"] == {"model-a": {"ok": 4}, "model-b": {"ok": 4}}
    assert out.meta["params"]["models"] == list(MODELS)
    assert out.meta["prompt_set_version"] == VERSION


def test_rerun_is_served_from_the_ledger(tmp_path: Path) -> None:
    params = GenerateParams(models=MODELS, samples=2)
    with run_fake_server() as server:
        first = _run(server, tmp_path, params)
        received = server.stats().totals.received
        second = _run(server, tmp_path, params)
        assert server.stats().totals.received == received == 8
    assert second.table["from_ledger"].all()
    assert second.meta["from_ledger"] == 8
    same = ["request_key", "essay_text", "params", "returned_model", "generated_at"]
    assert second.table.select(same).equals(first.table.select(same))


def test_faults_become_rows_with_a_status_and_no_essay(tmp_path: Path) -> None:
    scenario = FakeScenario.model_validate({"faults": [
        {"kind": "finish_reason", "finish_reason": "length", "models": ["gpt-a"]},
        {"kind": "status", "status": 400, "models": ["gpt-b"]},
    ]})
    params = GenerateParams(models=MODELS, samples=2)
    with run_fake_server(scenario) as server:
        out = _run(server, tmp_path, params)
    table = out.table
    assert table.height == 8  # nothing dropped
    a = table.filter(pl.col("model") == "model-a")
    b = table.filter(pl.col("model") == "model-b")
    assert set(a["status"]) == {"truncated"} and set(a["finish_reason"]) == {"length"}
    assert a["essay_text"].null_count() == 4 and a["raw_text"].null_count() == 0
    assert set(b["status"]) == {"api_error"} and b["essay_text"].null_count() == 4
    assert b["error_kind"].null_count() == 0 and b["error"].null_count() == 0
    assert out.meta["counts"] == {"model-a": {"truncated": 4}, "model-b": {"api_error": 4}}


def test_unknown_model_fails_before_sending(tmp_path: Path) -> None:
    with run_fake_server() as server:
        with pytest.raises(Exception, match="nope"):
            _run(server, tmp_path, GenerateParams(models=("nope",)))
        assert server.stats().totals.received == 0


def test_empty_results_give_a_typed_empty_table() -> None:
    table = essays_table(_prompts(), [], [], VERSION, specs={})
    assert table.height == 0 and dict(table.schema) == dict(ESSAY_COLUMNS)


def test_essays_table_rows_from_results_without_a_server() -> None:
    """Each row holds its request's and its result's fields, whatever the status; the
    params are the registry defaults overlaid with the call's, as canonical JSON."""
    from datetime import UTC, timedelta, timezone

    from essaybench.llm.types import CallStatus, ChatResult, Usage

    params = GenerateParams(models=MODELS, temperature=0.5)
    requests = build_requests(_prompts(), params)
    specs = {"model-a": fake_spec("model-a", model_id="gpt-a",
                                  default_params={"top_p": 0.9, "temperature": 1.0}),
             "model-b": fake_spec("model-b", model_id="gpt-b")}
    cn = timezone(timedelta(hours=8))
    results = [
        ChatResult(key="k0", model="model-a", status=CallStatus.OK, text="作文",
                   returned_model="gpt-a-2", finish_reason="stop", usage=Usage(3, 4),
                   latency_s=1.5, cost_usd=0.25, finished_at=datetime(2026, 1, 2, 3, 4, 5)),
        ChatResult(key="k1", model="model-b", status=CallStatus.TRUNCATED, text="作",
                   finish_reason="length", error_kind="length", error="cut",
                   finished_at=datetime(2026, 1, 2, 11, 4, 5, 6, tzinfo=cn)),
        ChatResult(key="k2", model="model-a", status=CallStatus.API_ERROR, from_ledger=True,
                   error_kind="http_500", error="boom"),
        ChatResult(key="k3", model="model-b", status=CallStatus.OK, text="文",
                   finished_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ]
    table = essays_table(_prompts(), requests, results, VERSION, specs=specs)
    assert dict(table.schema) == dict(ESSAY_COLUMNS)
    rows = table.rows(named=True)
    assert [r["prompt_id"] for r in rows] == ["p000000000000001"] * 2 + ["p000000000000002"] * 2
    assert [r["genre"] for r in rows] == ["argumentative"] * 2 + ["descriptive"] * 2
    assert [r["model_id"] for r in rows] == ["gpt-a", "gpt-b", "gpt-a", "gpt-b"]
    assert [r["status"] for r in rows] == ["ok", "truncated", "api_error", "ok"]
    assert [r["decision"] for r in rows] == ["kept", "truncated", "api_error", "kept"]
    assert [r["essay_text"] for r in rows] == ["作文", None, None, "文"]
    assert [r["raw_text"] for r in rows] == ["作文", "作", None, "文"]
    assert [r["generated_at"] for r in rows] == [
        "2026-01-02T03:04:05+00:00", "2026-01-02T03:04:05.000006+00:00", None,
        "2026-01-02T03:04:05+00:00"]
    seed = requests[0].params["seed"]
    assert json.loads(rows[0]["params"]) == {"seed": seed, "temperature": 0.5, "top_p": 0.9}
    assert rows[0]["params"] == (f'{{"seed":{seed},"temperature":0.5,"top_p":0.9}}')
    first = rows[0]
    assert (first["returned_model"], first["finish_reason"], first["input_tokens"],
            first["output_tokens"], first["cost_usd"], first["latency_s"],
            first["request_key"], first["from_ledger"], first["prompt_set_version"]) == (
        "gpt-a-2", "stop", 3, 4, 0.25, 1.5, "k0", False, VERSION)
    assert (rows[2]["error_kind"], rows[2]["error"], rows[2]["from_ledger"]) == (
        "http_500", "boom", True)
    with pytest.raises(ValueError, match="out of order"):
        essays_table(_prompts(), requests, results[::-1], VERSION, specs=specs)


def test_an_essay_not_written_in_chinese_is_flagged_off_language(tmp_path: Path) -> None:
    """Language compliance (issue 14, item 4): model-b answers in English; its essays are
    ok calls but off-language, an instruction violation counted per model."""
    scenario = FakeScenario.model_validate({"models": {
        "gpt-a": {"reply": "template", "template": "秋天的故乡，稻田金黄，AI 也写不出它的美。"},
        "gpt-b": {"reply": "template",
                  "template": "Autumn in my hometown is golden and quiet, 秋天."}}})
    with run_fake_server(scenario) as server:
        out = _run(server, tmp_path, GenerateParams(models=MODELS))
    rows = {m: out.table.filter(pl.col("model") == m) for m in MODELS}
    assert rows["model-a"]["off_language"].to_list() == [False, False]
    assert rows["model-b"]["off_language"].to_list() == [True, True]
    assert set(rows["model-b"]["status"]) == {"ok"}  # a violation, not a failed call
    share = rows["model-b"]["chinese_share"][0]
    assert share == pytest.approx(2 / (2 + 34))  # 秋天 against 34 Latin letters
    assert out.meta["off_language"] == {"model-b": 2}
    # The threshold is the config's.
    with run_fake_server(scenario) as server:
        strict = _run(server, tmp_path / "strict",
                      GenerateParams(models=MODELS, min_chinese_share=0.99))
    assert strict.table.filter(pl.col("model") == "model-a")["off_language"].to_list() \
        == [True, True]  # "AI" in Chinese prose is 2 Latin letters of 20 characters
