"""Cached input from the usage block (issue 26 item 2): the fake server on 127.0.0.1 reports
it as OpenAI and DeepSeek do, the client reads it (and ignores figures nobody could
believe), the ledger keeps it in a real DuckDB file, and the call's cost is checked against
a hand computation."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest

from essaybench.llm.fake.protocol import count_tokens
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.ledger import Ledger
from essaybench.llm.session import LEDGER_FILE, open_gateway
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message
from tests.llm.conftest import fake_spec, registry_of

RUBRIC = "你是一位严格的作文评审。请按评分标准逐项打分，并给出理由。" * 8
ESSAY = "秋天的校园里，落叶铺满了小路。"
PRICES = {"price_input_per_mtok": 2.0, "price_output_per_mtok": 8.0,
          "price_cached_input_per_mtok": 0.5}


def _request(i: int = 0) -> ChatRequest:
    return ChatRequest(model="fake", stage="judge", tag=str(i),
                       messages=(Message(role="system", content=RUBRIC),
                                 Message(role="user", content=f"{ESSAY}（第{i}篇）")))


def _run(tmp_path: Path, model: dict[str, Any], requests: list[ChatRequest],
         **spec: Any) -> list[ChatResult]:
    scenario = FakeScenario.model_validate({"models": {"*": {"reply": "template",
                                                             "template": "评分：7", **model}}})
    with run_fake_server(scenario) as server, open_gateway(
            registry_of(fake_spec(**{**PRICES, **spec})), tmp_path, ["fake"],
            base_urls={"fake": server.base_url}) as session:
        return session.run(requests)


def _ledger_rows(tmp_path: Path) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(tmp_path / LEDGER_FILE), read_only=True) as con:
        return con.execute("SELECT tag, input_tokens, cached_input_tokens, output_tokens, "
                           "cost_usd FROM llm_calls ORDER BY tag").fetchall()


def _hand_cost(inp: int, cached: int, out: int, factor: float = 1.0) -> float:
    return ((inp - cached) * 2.0 + cached * 0.5 + out * 8.0) / 1e6 * factor


@pytest.mark.parametrize("report", ["openai", "deepseek"])
def test_cached_input_is_read_recorded_and_priced(tmp_path: Path, report: str) -> None:
    results = _run(tmp_path, {"cache_report": report}, [_request(i) for i in range(3)])
    system_tokens = count_tokens(RUBRIC) + 4  # the fake's documented framing per message
    for result in results:
        assert result.status is CallStatus.OK
        assert result.usage.cached_input_tokens == system_tokens
        inp, out = result.usage.input_tokens, result.usage.output_tokens
        assert inp is not None and out is not None and inp > system_tokens
        assert result.cost_usd == pytest.approx(_hand_cost(inp, system_tokens, out), rel=1e-12)
        assert result.cost_usd is not None
        assert result.cost_usd < (inp * 2.0 + out * 8.0) / 1e6  # below the list-price bound
    rows = _ledger_rows(tmp_path)
    assert [(r[0], r[2]) for r in rows] == [(str(i), system_tokens) for i in range(3)]
    assert all(r[4] == pytest.approx(_hand_cost(r[1], r[2], r[3])) for r in rows)
    # a rerun served from the ledger gets the same usage and cost back
    with Ledger(tmp_path / LEDGER_FILE) as ledger:
        keys = [r.key for r in results]
        served = ledger.lookup_ok(keys)
    assert [served[k].usage for k in keys] == [r.usage for r in results]


def test_a_fixed_cached_prefix_and_off_peak_price(tmp_path: Path) -> None:
    # the whole day is off-peak at 25%: the factor applies to the cached-input cost
    (result,) = _run(tmp_path, {"cache_report": "openai", "cached_prefix": 12}, [_request()],
                     off_peak={"start": "00:00", "end": "00:00", "price_factor": 0.25})
    inp, out = result.usage.input_tokens, result.usage.output_tokens
    assert inp is not None and out is not None and result.usage.cached_input_tokens == 12
    assert result.finished_at is not None and result.finished_at.tzinfo is not None
    assert result.cost_usd == pytest.approx(_hand_cost(inp, 12, out, 0.25), rel=1e-12)


def test_an_off_peak_window_that_does_not_hold_changes_nothing(tmp_path: Path) -> None:
    today = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"][datetime.now(UTC).weekday()]
    others = [d for d in ("mon", "tue", "wed", "thu", "fri", "sat", "sun") if d != today]
    (result,) = _run(tmp_path, {"cache_report": "openai", "cached_prefix": 12}, [_request()],
                     off_peak={"start": "00:00", "end": "00:00", "price_factor": 0.25,
                               "days": others})
    inp, out = result.usage.input_tokens, result.usage.output_tokens
    assert inp is not None and out is not None
    if result.finished_at is not None and result.finished_at.weekday() == \
            datetime.now(UTC).weekday():  # not run across midnight
        assert result.cost_usd == pytest.approx(_hand_cost(inp, 12, out), rel=1e-12)


@pytest.mark.parametrize("extra", [
    {"prompt_tokens_details": {"cached_tokens": -3}},
    {"prompt_tokens_details": {"cached_tokens": "12"}},
    {"prompt_tokens_details": {"cached_tokens": 12.5}},
    {"prompt_tokens_details": {"cached_tokens": True}},
    {"prompt_tokens_details": {"cached_tokens": 10**9}},  # above prompt_tokens
    {"prompt_tokens_details": "cached: 12"},
    {"prompt_cache_hit_tokens": 12, "prompt_cache_miss_tokens": 1},  # hit + miss != prompt
    {"prompt_cache_hit_tokens": None},
])
def test_unbelievable_cached_figures_are_ignored_and_the_call_stays_ok(
        tmp_path: Path, extra: dict[str, Any]) -> None:
    (result,) = _run(tmp_path, {"usage_extra": extra}, [_request()])
    assert result.status is CallStatus.OK and result.text == "评分：7"
    inp, out = result.usage.input_tokens, result.usage.output_tokens
    assert inp is not None and out is not None
    assert result.usage.cached_input_tokens is None
    assert result.cost_usd == pytest.approx((inp * 2.0 + out * 8.0) / 1e6, rel=1e-12)
    [(_, _, cached, _, cost)] = _ledger_rows(tmp_path)
    assert cached is None and cost == pytest.approx(result.cost_usd)


def test_no_cached_field_is_unknown_not_zero(tmp_path: Path) -> None:
    (result,) = _run(tmp_path, {}, [_request()])
    assert result.ok and result.usage.cached_input_tokens is None


def test_a_reported_zero_is_a_known_zero(tmp_path: Path) -> None:
    (result,) = _run(tmp_path, {"cache_report": "openai", "cached_prefix": 0}, [_request()])
    inp, out = result.usage.input_tokens, result.usage.output_tokens
    assert result.usage.cached_input_tokens == 0 and inp is not None and out is not None
    assert result.cost_usd == pytest.approx((inp * 2.0 + out * 8.0) / 1e6, rel=1e-12)


def test_reasks_add_their_cached_input(tmp_path: Path) -> None:
    # the first structured reply breaks the schema: a re-ask, billed with its cached prefix
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    request = _request().model_copy(update={"response_schema": schema})
    (result,) = _run(tmp_path, {"cache_report": "deepseek", "structured": "script",
                                "structured_script": ["不是JSON", '{"n": 3}']}, [request])
    assert result.ok and result.reasks == 1 and result.parsed == {"n": 3}
    assert result.usage.cached_input_tokens == 2 * (count_tokens(RUBRIC) + 4)


@pytest.mark.parametrize("extra", [{"prompt_tokens": "many"}, {"completion_tokens": -1},
                                   {"prompt_tokens": [1]}])
def test_an_unbelievable_token_count_is_unknown_usage_and_cost(
        tmp_path: Path, extra: dict[str, Any]) -> None:
    # a count that is there but is not one: the call is ok, its usage and cost unknown
    # (a string made the client raise out of complete())
    (result,) = _run(tmp_path, {"usage_extra": extra, "cache_report": "openai"}, [_request()])
    assert result.status is CallStatus.OK and result.text == "评分：7"
    assert result.usage.input_tokens is None and result.usage.output_tokens is None
    assert result.cost_usd is None
    [(_, inp, cached, out, cost)] = _ledger_rows(tmp_path)
    assert (inp, cached, out, cost) == (None, None, None, None)
