"""The OpenAI-compatible backend against the project's fake server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from essaybench.llm.client import OpenAICompatBackend
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.retry import Backoff
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message
from tests.llm.conftest import fake_spec

FAST = Backoff(base_s=0.01, cap_s=0.05)
SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer", "enum": list(range(1, 11))},
                   "why": {"type": "string", "maxLength": 30}},
    "required": ["score", "why"], "additionalProperties": False,
}


def _request(text: str = "写一篇关于秋天的短文", **kw: Any) -> ChatRequest:
    return ChatRequest(model="fake", messages=(Message(role="user", content=text),), **kw)


def _call(scenario: dict[str, Any], request: ChatRequest | None = None,
          **spec_overrides: Any) -> tuple[ChatResult, Any]:
    with run_fake_server(FakeScenario.model_validate(scenario)) as server:
        async def main() -> ChatResult:
            backend = OpenAICompatBackend(fake_spec(**spec_overrides), server.base_url,
                                          backoff=FAST, seed=0)
            try:
                return await backend.complete(request or _request())
            finally:
                await backend.aclose()
        return asyncio.run(main()), server.stats()


def test_ok_reply_records_model_usage_cost() -> None:
    result, stats = _call({"models": {"gpt-x": {"returned_model": "gpt-x-2025-01-01",
                                                "reply": "template", "template": "答：{prompt}"}}})
    assert result.status is CallStatus.OK and result.text == "答：写一篇关于秋天的短文"
    assert result.returned_model == "gpt-x-2025-01-01" and result.finish_reason == "stop"
    assert result.usage.input_tokens and result.usage.output_tokens
    assert result.cost_usd == pytest.approx(
        (result.usage.input_tokens * 1.0 + result.usage.output_tokens * 2.0) / 1e6)
    assert result.attempts == 1 and stats.totals.completed == 1 and result.latency_s > 0


def test_429_retry_after_is_honoured() -> None:
    t0 = time.monotonic()
    result, stats = _call({"faults": [{"kind": "status", "status": 429, "retry_after": 0.3,
                                       "first_attempts": 2}]})
    assert result.status is CallStatus.OK and result.attempts == 3
    assert time.monotonic() - t0 >= 0.6
    assert stats.totals.by_status == {"429": 2, "200": 1}


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_transient_5xx_retried(status: int) -> None:
    result, _ = _call({"faults": [{"kind": "status", "status": status, "first_attempts": 1}]})
    assert result.status is CallStatus.OK and result.attempts == 2


def test_transient_past_budget_is_api_error() -> None:
    result, stats = _call({"faults": [{"kind": "status", "status": 503}]}, max_retries=2)
    assert result.status is CallStatus.API_ERROR and result.error_kind == "http_503"
    assert result.attempts == 3 and stats.totals.received == 3
    assert result.error is not None and "after 2 retries" in result.error


@pytest.mark.parametrize("status,code,kind", [
    (400, None, "http_400"), (401, None, "http_401"), (403, None, "http_403"),
    (404, None, "http_404"), (400, "context_length_exceeded", "context_length"),
])
def test_non_transient_fails_fast(status: int, code: str | None, kind: str) -> None:
    fault: dict[str, Any] = {"kind": "status", "status": status}
    if code:
        fault["code"] = code
    result, stats = _call({"faults": [fault]})
    assert result.status is CallStatus.API_ERROR and result.error_kind == kind
    assert result.attempts == 1 and stats.totals.received == 1


def test_hang_past_timeout_is_retried_then_succeeds() -> None:
    result, _ = _call({"faults": [{"kind": "hang", "seconds": 5, "first_attempts": 1}]},
                      timeout_s=0.3)
    assert result.status is CallStatus.OK and result.attempts == 2


def test_hang_every_time_is_timeout() -> None:
    result, _ = _call({"faults": [{"kind": "hang", "seconds": 5}]}, timeout_s=0.2,
                      max_retries=1)
    assert result.status is CallStatus.API_ERROR and result.error_kind == "read_timeout"


@pytest.mark.parametrize("how", ["reset", "close"])
def test_dropped_connection_is_retried(how: str) -> None:
    result, _ = _call({"faults": [{"kind": "drop", "how": how, "first_attempts": 1}]})
    assert result.status is CallStatus.OK and result.attempts == 2


@pytest.mark.parametrize("kind", ["malformed_json", "truncated_json"])
def test_garbled_body_is_retried(kind: str) -> None:
    result, _ = _call({"faults": [{"kind": kind, "first_attempts": 1}]})
    assert result.status is CallStatus.OK and result.attempts == 2


def test_empty_content_is_reasked_then_recorded() -> None:
    result, _ = _call({"faults": [{"kind": "empty_content"}]}, max_reasks=2)
    assert result.status is CallStatus.API_ERROR and result.error_kind == "empty_content"
    assert result.attempts == 3


def test_content_filter_is_refused_and_length_is_truncated() -> None:
    refused, _ = _call({"faults": [{"kind": "finish_reason", "finish_reason": "content_filter"}]})
    assert refused.status is CallStatus.REFUSED and refused.attempts == 1
    cut, _ = _call({"faults": [{"kind": "finish_reason", "finish_reason": "length"}]})
    assert cut.status is CallStatus.TRUNCATED and cut.text and cut.error_kind == "length"


def test_structured_reply_is_validated() -> None:
    result, _ = _call({}, _request(response_schema=SCHEMA))
    assert result.status is CallStatus.OK
    assert result.parsed["score"] in range(1, 11) and isinstance(result.parsed["why"], str)


def test_invalid_structured_is_reasked_with_the_error() -> None:
    scenario = {"models": {"gpt-x": {"structured": "script", "structured_script": [
        '{"score": 42, "why": "太高"}', '{"score": 7, "why": "好"}']}}}
    result, stats = _call(scenario, _request(response_schema=SCHEMA))
    assert result.status is CallStatus.OK and result.parsed == {"score": 7, "why": "好"}
    assert result.attempts == 2 and stats.totals.received == 2


@pytest.mark.parametrize("written", ["7.0", "1e1"])
def test_a_score_written_as_a_float_is_reasked(written: str) -> None:
    scenario = {"models": {"gpt-x": {"structured": "script", "structured_script": [
        f'{{"score": {written}, "why": "好"}}', '{"score": 7, "why": "好"}']}}}
    result, stats = _call(scenario, _request(response_schema=SCHEMA))
    assert result.status is CallStatus.OK and result.parsed == {"score": 7, "why": "好"}
    assert (result.attempts, result.reasks) == (2, 1) and stats.totals.received == 2


def test_invalid_structured_past_budget_is_parse_error_with_raw_text() -> None:
    scenario = {"faults": [{"kind": "invalid_structured", "variant": "not_json"}]}
    result, _ = _call(scenario, _request(response_schema=SCHEMA), max_reasks=1)
    assert result.status is CallStatus.PARSE_ERROR and result.error_kind == "schema"
    assert result.parsed is None and result.text  # the raw reply is kept
    assert result.attempts == 2


def test_retries_and_reasks_are_counted_apart() -> None:
    # Each distinct body first meets a 503 (a transport retry); the first body's reply then
    # breaks the schema (a re-ask, a new body), the re-ask's reply is valid.
    scenario = {"faults": [{"kind": "status", "status": 503, "first_attempts": 1}],
                "models": {"gpt-x": {"structured": "script", "structured_script": [
                    '{"score": 42, "why": "太高"}', '{"score": 7, "why": "好"}']}}}
    result, stats = _call(scenario, _request(response_schema=SCHEMA))
    assert result.status is CallStatus.OK and result.parsed == {"score": 7, "why": "好"}
    assert (result.attempts, result.retries, result.reasks) == (4, 2, 1)
    assert stats.totals.received == 4
    empty, _ = _call({"faults": [{"kind": "empty_content"}]}, max_reasks=2)
    assert (empty.attempts, empty.retries, empty.reasks) == (3, 0, 2)
    plain, _ = _call({"faults": [{"kind": "status", "status": 500, "first_attempts": 2}]})
    assert (plain.attempts, plain.retries, plain.reasks) == (3, 2, 0)


def test_the_reask_says_what_was_wrong() -> None:
    # The echo model answers the re-ask with the re-ask itself: the words the model got.
    two = '{"score": 3, "why": "x"} {"score": 9, "why": "y"}'
    scenario = {"models": {"*": {"structured": "reply", "reply": "echo"}}}
    result, stats = _call(scenario, _request(two, response_schema=SCHEMA), max_reasks=1)
    assert stats.totals.received == 2 and result.status is CallStatus.PARSE_ERROR
    assert result.reasks == 1 and result.text is not None
    assert "second JSON object" in result.text and "exactly one JSON object" in result.text


def test_api_key_sent_from_environment_only(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-DO-NOT-LEAK-4242"
    monkeypatch.setenv("FAKE_KEY_FOR_TEST", secret)
    scenario = {"api_key_env": "FAKE_KEY_FOR_TEST"}
    ok, _ = _call(scenario, api_key_env="FAKE_KEY_FOR_TEST")
    assert ok.status is CallStatus.OK
    monkeypatch.setenv("FAKE_KEY_FOR_TEST_WRONG", "sk-wrong")
    denied, _ = _call(scenario, api_key_env="FAKE_KEY_FOR_TEST_WRONG")
    assert denied.status is CallStatus.API_ERROR and denied.error_kind == "http_401"
    assert secret not in repr(ok) and secret not in repr(denied)


def test_refusal_in_words_is_refused_without_reask() -> None:
    scenario = {"models": {"*": {"rules": [{"contains": ["秋天"],
                                            "reply": "抱歉，我无法完成这个请求。"}]}}}
    result, stats = _call(scenario, _request(response_schema=SCHEMA), max_reasks=2)
    assert result.status is CallStatus.REFUSED and result.error_kind == "refusal"
    assert result.text == "抱歉，我无法完成这个请求。" and result.parsed is None
    assert result.attempts == 1 and stats.totals.received == 1


def test_reply_rules_match_the_first_user_message_through_reasks() -> None:
    # The rule's reply breaks the schema; the re-ask's last user message is the re-ask
    # wording, yet the same rule answers again, so the budget runs out: parse_error.
    scenario = {"models": {"*": {"rules": [
        {"contains": ["冬天"], "reply": '{"score": 3, "why": "冬"}'},
        {"contains": ["秋天"], "reply": '{"score": 11, "why": "太高"}'}]}}}
    result, stats = _call(scenario, _request(response_schema=SCHEMA), max_reasks=2)
    assert result.status is CallStatus.PARSE_ERROR and "11" in (result.error or "")
    assert result.attempts == 3 and stats.totals.received == 3
    ok, _ = _call(scenario, _request("写冬天", response_schema=SCHEMA))
    assert ok.status is CallStatus.OK and ok.parsed == {"score": 3, "why": "冬"}
