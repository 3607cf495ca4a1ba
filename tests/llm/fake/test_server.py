"""The fake OpenAI-compatible server, seen the way the gateway sees it: plain httpx on loopback."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from essaybench.core.hashing import canonical_json, sha256_hex
from essaybench.llm.fake import server as fake_server
from essaybench.llm.fake.protocol import count_tokens
from essaybench.llm.fake.scenario import (
    DropFault,
    EmptyContentFault,
    FakeScenario,
    FinishReasonFault,
    HangFault,
    InvalidStructuredFault,
    Latency,
    MalformedJsonFault,
    ModelScenario,
    StatusFault,
    TruncatedJsonFault,
    unit_hash,
)
from essaybench.llm.fake.schema import generate_instance, violate
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server, spawn_fake_server

jsonschema = pytest.importorskip("jsonschema")

STATUS_CODES = (400, 401, 403, 404, 429, 500, 502, 503, 504)
ESSAY_SCHEMA: dict[str, Any] = {  # shaped like pydantic's model_json_schema()
    "$defs": {
        "Trait": {"type": "object", "additionalProperties": False,
                  "properties": {"name": {"type": "string", "enum": ["论点", "论据", "结构"]},
                                 "score": {"type": "integer", "minimum": 1, "maximum": 10},
                                 "comment": {"type": "string", "maxLength": 12}},
                  "required": ["name", "score", "comment"]},
    },
    "type": "object", "additionalProperties": False,
    "properties": {
        "analysis": {"type": "string", "minLength": 2, "maxLength": 40},
        "traits": {"type": "array", "items": {"$ref": "#/$defs/Trait"},
                   "minItems": 2, "maxItems": 4},
        "overall": {"type": "number", "minimum": 0, "exclusiveMaximum": 100},
        "grade": {"type": "integer", "enum": [1, 2, 3]},
        "passed": {"type": "boolean"},
        "note": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True,
                 "minItems": 1, "maxItems": 3},
    },
    "required": ["analysis", "traits", "overall", "grade", "passed"],
}


def _scenario() -> FakeScenario:
    faults: list[Any] = [StatusFault.model_validate({"status": s, "models": [f"s{s}"]})
                         for s in STATUS_CODES]
    faults += [
        StatusFault(status=429, retry_after=2, first_attempts=1, models=("flaky",)),
        StatusFault(status=400, code="context_length_exceeded", models=("too-long",)),
        HangFault(seconds=5, models=("hang",)),
        HangFault(seconds=0.2, models=("hang-short",)),
        DropFault(how="reset", models=("drop",)),
        DropFault(how="close", models=("drop-close",)),
        MalformedJsonFault(models=("malformed",)),
        TruncatedJsonFault(models=("truncated",)),
        EmptyContentFault(models=("empty",)),
        FinishReasonFault(finish_reason="content_filter", content="partial", models=("filtered",)),
        FinishReasonFault(finish_reason="length", content="empty", models=("cut",)),
        InvalidStructuredFault(models=("bad-json",)),
        InvalidStructuredFault(variant="not_json", models=("prose",)),
        StatusFault(status=503, rate=0.5, seed=7, models=("coin",)),
        StatusFault(status=500, every_nth=3, models=("third",)),
    ]
    names = {f"s{s}" for s in STATUS_CODES} | {
        "flaky", "too-long", "hang", "hang-short", "drop", "drop-close", "malformed", "truncated",
        "empty", "filtered", "cut", "bad-json", "prose", "coin", "third"}
    models = {name: ModelScenario() for name in names}
    models |= {
        "gpt-x": ModelScenario(returned_model="gpt-x-2025-01-01"),
        "tmpl": ModelScenario(reply="template", template="第{n}篇（{model}）：{prompt}"),
        "scripted": ModelScenario(reply="script", script=("甲", "乙", "丙")),
        "json-script": ModelScenario(structured="script",
                                     structured_script=('{"score": 7}', "不是JSON")),
        "small": ModelScenario(context_window=40),
        "slow": ModelScenario(latency_ms=150),
    }
    return FakeScenario(models=models, faults=tuple(faults))


@pytest.fixture(scope="module", params=["httptools", "h11"])
def server(request: pytest.FixtureRequest) -> Iterator[FakeServerHandle]:
    # Every test against this server runs over both protocols: httptools is what the fake
    # serves with, h11 the fallback when httptools is not installed.
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "h11":
            patch.setattr(fake_server, "_Protocol", fake_server._TransportH11)
        else:
            assert fake_server._Protocol.__name__ == "_TransportHttpTools"
        with run_fake_server(_scenario()) as handle:
            yield handle


@pytest.fixture
def fake(server: FakeServerHandle) -> FakeServerHandle:
    server.reset()
    return server


@pytest.fixture(scope="module")
def _shared_client(server: FakeServerHandle) -> Iterator[httpx.Client]:
    # verify=False: plain HTTP, and building the default TLS context costs ~50 ms.
    with httpx.Client(base_url=server.base_url, timeout=5, trust_env=False, verify=False) as c:
        yield c


@pytest.fixture
def client(fake: FakeServerHandle, _shared_client: httpx.Client) -> httpx.Client:
    return _shared_client


def _body(model: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "system", "content": "你是作文老师。"},
                                         {"role": "user", "content": text}], **extra}


def chat(client: httpx.Client, model: str, text: str = "写一篇作文",
         **extra: Any) -> httpx.Response:
    return client.post("/chat/completions", json=_body(model, text, **extra))


def _content(response: httpx.Response) -> str:
    content = response.json()["choices"][0]["message"]["content"]
    assert isinstance(content, str)
    return content


def _schema_format(schema: dict[str, Any], style: str) -> dict[str, Any]:
    if style == "openai":
        return {"type": "json_schema", "json_schema": {"name": "Essay", "schema": schema}}
    return {"type": "json_object", "schema": schema}  # llama.cpp


# --- endpoints and the OpenAI shape -----------------------------------------------------------

def test_completion_has_the_openai_shape_and_the_returned_model_id(client: httpx.Client) -> None:
    messages = [{"role": "system", "content": "你是作文老师。"},
                {"role": "user", "content": "第一问"},
                {"role": "assistant", "content": "好的"},
                {"role": "user", "content": [{"type": "text", "text": "请写“秋天”"}]}]
    r = client.post("/chat/completions", json={"model": "gpt-x", "messages": messages,
                                                "temperature": 0.8, "seed": 1, "max_tokens": 99})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    data = r.json()
    assert data["object"] == "chat.completion" and data["id"].startswith("chatcmpl-")
    assert isinstance(data["created"], int) and data["model"] == "gpt-x-2025-01-01"
    choice = data["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "请写“秋天”", "refusal": None}
    assert choice["finish_reason"] == "stop"
    texts = ("你是作文老师。", "第一问", "好的", "请写“秋天”")
    prompt = sum(count_tokens(t) + 4 for t in texts) + 3
    reply = count_tokens("请写“秋天”")
    assert data["usage"] == {"prompt_tokens": prompt, "completion_tokens": reply,
                             "total_tokens": prompt + reply}


def test_token_rule() -> None:
    assert count_tokens("") == 0
    assert count_tokens("你好") == 2  # ceil(2 / 1.6)
    assert count_tokens("秋天的落叶，金黄色。") == math.ceil(10 / 1.6)
    assert count_tokens("abcdefgh") == 2 and count_tokens("abcdefghi") == 3
    assert count_tokens("秋天 autumn") == 2 + 2


def test_template_numbers_distinct_requests_and_script_cycles(client: httpx.Client) -> None:
    assert _content(chat(client, "tmpl", "甲文")) == "第1篇（tmpl）：甲文"
    assert _content(chat(client, "tmpl", "乙文")) == "第2篇（tmpl）：乙文"
    # A repeat of the first body is not a new distinct request.
    assert _content(chat(client, "tmpl", "甲文")) == "第1篇（tmpl）：甲文"
    replies = [_content(chat(client, "scripted", f"题{i}")) for i in range(4)]
    assert replies == ["甲", "乙", "丙", "甲"]
    assert _content(chat(client, "scripted", "题1")) == "乙"


def test_models_health_and_unknown_routes(client: httpx.Client, fake: FakeServerHandle) -> None:
    listed = client.get("/models").json()
    assert listed["object"] == "list"
    assert {m["id"] for m in listed["data"]} >= {"gpt-x", "tmpl", "s429"}
    assert all(m["object"] == "model" for m in listed["data"])
    assert httpx.get(f"{fake.root_url}/health", trust_env=False).json() == {"status": "ok"}
    missing = client.get("/nope")
    assert missing.status_code == 404 and "message" in missing.json()["error"]
    assert client.get("/chat/completions").status_code == 405


@pytest.mark.parametrize(("payload", "status", "code"), [
    (b"{not json", 400, None),
    (b"\xff\xfe", 400, None),
    (json.dumps({"model": "gpt-x"}).encode(), 400, None),  # no messages
    (json.dumps({"model": "gpt-x", "messages": []}).encode(), 400, None),
    (json.dumps(_body("gpt-x", "x", stream=True)).encode(), 400, None),
    (json.dumps(_body("no-such-model", "x")).encode(), 404, "model_not_found"),
])
def test_request_errors_use_the_openai_error_shape(client: httpx.Client, payload: bytes,
                                                   status: int, code: str | None) -> None:
    r = client.post("/chat/completions", content=payload,
                    headers={"content-type": "application/json"})
    assert r.status_code == status
    error = r.json()["error"]
    assert set(error) >= {"message", "type", "code"} and error["code"] == code
    assert error["type"] == "invalid_request_error" and error["message"]


def test_context_window_and_max_tokens(client: httpx.Client, fake: FakeServerHandle) -> None:
    r = chat(client, "small", "秋" * 80)
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"
    assert chat(client, "small", "秋").status_code == 200
    cut = chat(client, "gpt-x", "秋天" * 50, max_tokens=5)
    data = cut.json()
    assert data["choices"][0]["finish_reason"] == "length"
    assert data["usage"]["completion_tokens"] <= 5 and "秋天".startswith(_content(cut)[:2])
    stats = fake.stats()
    assert stats.totals.completed == 1  # only the short "small" reply; "length" is no clean finish
    assert stats.totals.rejected == 1


# --- faults ------------------------------------------------------------------------------------

@pytest.mark.parametrize("status", STATUS_CODES)
def test_status_faults(client: httpx.Client, status: int) -> None:
    r = chat(client, f"s{status}")
    assert r.status_code == status
    assert set(r.json()["error"]) >= {"message", "type", "code"}
    assert "retry-after" not in r.headers


def test_rate_limit_with_retry_after_then_success(client: httpx.Client,
                                                  fake: FakeServerHandle) -> None:
    first = chat(client, "flaky", "限流")
    assert first.status_code == 429 and first.headers["retry-after"] == "2"
    assert first.headers["retry-after-ms"] == "2000"
    assert first.json()["error"]["code"] == "rate_limit_exceeded"
    assert chat(client, "flaky", "限流").status_code == 200  # the same body's second attempt
    assert chat(client, "flaky", "另一个").status_code == 429  # a new body starts over
    assert fake.stats().totals.faults == {"status": 2}


def test_context_length_fault(client: httpx.Client) -> None:
    r = chat(client, "too-long")
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "context_length_exceeded"


def test_hang_outlasts_the_client_timeout(client: httpx.Client) -> None:
    t0 = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        client.post("/chat/completions", json=_body("hang", "x"), timeout=0.3)
    assert time.monotonic() - t0 < 2


def test_hang_ends_by_closing_without_a_response(client: httpx.Client) -> None:
    t0 = time.monotonic()
    with pytest.raises(httpx.RemoteProtocolError):
        chat(client, "hang-short")
    assert 0.2 <= time.monotonic() - t0 < 2


def test_drop_resets_or_closes_the_connection(client: httpx.Client,
                                              fake: FakeServerHandle) -> None:
    with pytest.raises(httpx.ReadError):  # RST: "connection reset by peer"
        chat(client, "drop")
    with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
        chat(client, "drop-close")
    assert chat(client, "gpt-x").status_code == 200  # the server itself is fine
    stats = fake.stats()
    assert stats.totals.faults == {"drop": 2} and stats.totals.by_status == {"200": 1}


def test_malformed_and_truncated_bodies(client: httpx.Client) -> None:
    malformed = chat(client, "malformed")
    assert malformed.status_code == 200
    with pytest.raises(ValueError):
        malformed.json()
    truncated = chat(client, "truncated", "半截")
    assert truncated.status_code == 200 and truncated.text.startswith('{"id": "chatcmpl-')
    with pytest.raises(ValueError):
        truncated.json()


def test_empty_content_and_finish_reason_faults(client: httpx.Client,
                                                fake: FakeServerHandle) -> None:
    empty = chat(client, "empty").json()["choices"][0]
    assert empty["message"]["content"] == "" and empty["finish_reason"] == "stop"
    filtered = chat(client, "filtered", "一二三四五六").json()["choices"][0]
    assert filtered == {**filtered, "finish_reason": "content_filter"}
    assert filtered["message"]["content"] == "一二三"
    cut = chat(client, "cut").json()
    assert cut["choices"][0]["finish_reason"] == "length"
    assert cut["choices"][0]["message"]["content"] == "" and cut["usage"]["completion_tokens"] == 0
    assert fake.stats().totals.completed == 0  # faulty 200s are not clean completions


def test_invalid_structured_faults(client: httpx.Client) -> None:
    for style in ("openai", "llama"):
        fmt = _schema_format(ESSAY_SCHEMA, style)
        broken = json.loads(_content(chat(client, "bad-json", style, response_format=fmt)))
        assert not jsonschema.Draft202012Validator(ESSAY_SCHEMA).is_valid(broken)
        prose = _content(chat(client, "prose", style, response_format=fmt))
        with pytest.raises(ValueError):
            json.loads(prose)
    # The rule is for structured requests only: a plain request to the same model is untouched.
    assert _content(chat(client, "prose", "平常")) == "平常"


def test_rate_decisions_are_a_pure_function_of_body_attempt_and_seed(
        client: httpx.Client, fake: FakeServerHandle) -> None:
    def outcomes() -> list[int]:
        return [chat(client, "coin", f"题{i}").status_code for i in range(30) for _ in range(3)]

    first = outcomes()
    expected = []
    for i in range(30):
        key = sha256_hex(canonical_json(_body("coin", f"题{i}")))
        expected += [503 if unit_hash("fault", key, a, 7) < 0.5 else 200 for a in (1, 2, 3)]
    assert first == expected
    assert 20 < first.count(503) < 70  # about half, so both branches are exercised
    fake.reset()
    assert outcomes() == first  # reproducible after a reset (and across runs: no state)


def test_every_nth(client: httpx.Client) -> None:
    codes = [chat(client, "third", f"第{i}").status_code for i in range(1, 10)]
    assert codes == [200, 200, 500] * 3


# --- structured replies ------------------------------------------------------------------------

@pytest.mark.parametrize("style", ["openai", "llama"])
def test_schema_mode_returns_valid_deterministic_json(client: httpx.Client, style: str) -> None:
    fmt = _schema_format(ESSAY_SCHEMA, style)
    replies = [_content(chat(client, "gpt-x", f"作文{i}", response_format=fmt)) for i in range(5)]
    validator = jsonschema.Draft202012Validator(ESSAY_SCHEMA)
    for text in replies:
        obj = json.loads(text)
        validator.validate(obj)
        assert 2 <= len(obj["traits"]) <= 4 and all(1 <= t["score"] <= 10 for t in obj["traits"])
    assert len(set(replies)) > 1  # seeded by the request, so different requests differ
    assert _content(chat(client, "gpt-x", "作文0", response_format=fmt)) == replies[0]


def test_json_object_without_schema_and_structured_script(client: httpx.Client) -> None:
    plain = chat(client, "gpt-x", "随便", response_format={"type": "json_object"})
    assert json.loads(_content(plain)) == {"reply": "随便"}
    fmt = _schema_format(ESSAY_SCHEMA, "openai")
    scripted = [_content(chat(client, "json-script", f"s{i}", response_format=fmt))
                for i in range(3)]
    assert scripted == ['{"score": 7}', "不是JSON", '{"score": 7}']


def test_generator_is_valid_across_seeds_and_violate_breaks_the_schema() -> None:
    validator = jsonschema.Draft202012Validator(ESSAY_SCHEMA)
    for seed in range(200):
        value = generate_instance(ESSAY_SCHEMA, seed)
        validator.validate(value)
        assert value == generate_instance(ESSAY_SCHEMA, seed)
        assert not validator.is_valid(violate(ESSAY_SCHEMA, value))
    for schema in ({"type": "string", "maxLength": 3}, {"type": "integer", "minimum": -5,
                                                        "maximum": -2},
                   {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                   {"type": "array", "items": {"type": "boolean"}, "minItems": 1},
                   {"enum": ["a", "b"]}, {"type": ["null", "integer"]}):
        v = jsonschema.Draft202012Validator(schema)
        for seed in range(30):
            value = generate_instance(schema, seed)
            v.validate(value)
            assert not v.is_valid(violate(schema, value))


# --- counters ----------------------------------------------------------------------------------

def test_counters_per_key_per_model_and_reset(client: httpx.Client,
                                              fake: FakeServerHandle) -> None:
    chat(client, "gpt-x", "A")
    chat(client, "gpt-x", "A")  # paid twice
    chat(client, "tmpl", "B")
    assert chat(client, "flaky", "C").status_code == 429
    assert chat(client, "flaky", "C").status_code == 200
    client.post("/chat/completions", content=b"{", headers={"content-type": "application/json"})
    stats = fake.stats(per_key=True)
    assert stats.totals.received == 5 and stats.totals.completed == 4
    assert stats.totals.distinct_keys == 3 and stats.totals.rejected == 1
    assert stats.totals.by_status == {"200": 4, "400": 1, "429": 1}
    assert stats.completed_per_key == {"0": 0, "1": 2, "2": 1}
    assert stats.received_per_key == {"1": 1, "2": 2}
    assert stats.per_model["gpt-x"].received == 2 and stats.per_model["gpt-x"].completed == 2
    assert stats.per_model["flaky"].received == 2 and stats.per_model["flaky"].completed == 1
    key_a = sha256_hex(canonical_json(_body("gpt-x", "A")))
    assert stats.per_key is not None and stats.per_key[key_a].completed == 2
    fake.reset()
    after = fake.stats()
    assert after.totals.received == 0 and after.per_model == {}
    assert after.completed_per_key == {"0": 0, "1": 0, "2": 0}
    assert chat(client, "flaky", "C").status_code == 429  # attempts start over too


def _burn_cpu(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_stats_report_the_serving_process_cpu_time(fake: FakeServerHandle) -> None:
    before = fake.stats().totals.cpu_s
    _burn_cpu(0.25)  # in-process, the server's process is this one
    after = fake.stats().totals.cpu_s
    assert before > 0 and after - before >= 0.2
    fake.reset()
    assert fake.stats().totals.cpu_s >= after  # a reset does not zero it


def test_stats_over_raw_http(client: httpx.Client, fake: FakeServerHandle) -> None:
    chat(client, "gpt-x", "A")
    raw = httpx.get(f"{fake.root_url}/_fake/stats", trust_env=False).json()
    assert set(raw) == {"totals", "per_model", "completed_per_key", "received_per_key", "batch"}
    assert raw["completed_per_key"] == {"0": 0, "1": 1, "2": 0}
    assert httpx.post(f"{fake.root_url}/_fake/reset", trust_env=False).status_code == 200
    assert fake.stats().totals.received == 0


# --- latency, auth, config, run modes ----------------------------------------------------------

def test_latency(client: httpx.Client) -> None:
    t0 = time.monotonic()
    assert chat(client, "slow").status_code == 200
    assert time.monotonic() - t0 >= 0.15
    jittery = ModelScenario(latency_ms=Latency(mean=200, jitter=50, seed=3))
    draws = [jittery.latency_s(f"k{i}", 1) for i in range(50)]
    assert all(0.15 <= d <= 0.25 for d in draws) and len(set(draws)) > 40
    assert draws == [jittery.latency_s(f"k{i}", 1) for i in range(50)]


def test_capacity_serves_that_many_at_once_and_queues_the_rest() -> None:
    """A self-hosted server's fixed capacity: 6 requests at once to a server of capacity 2
    and 200 ms each are served two at a time, in three waves (>= 0.6 s), each one's
    latency counted from when a slot took it; without a capacity all six run at once."""
    def six_at_once(scenario: FakeScenario) -> tuple[float, int, int, int]:
        async def send(base_url: str) -> list[int]:
            async with httpx.AsyncClient(base_url=base_url, trust_env=False,
                                         timeout=10) as c:
                replies = await asyncio.gather(*(c.post("/chat/completions", json=_body(
                    "m", f"第{i}篇")) for i in range(6)))
            return [r.status_code for r in replies]

        with run_fake_server(scenario) as handle:
            t0 = time.monotonic()
            assert asyncio.run(send(handle.base_url)) == [200] * 6
            elapsed = time.monotonic() - t0
            totals = handle.stats().totals
            handle.reset()  # peaks start again from what is in service now: nothing
            after = handle.stats().totals
        assert (after.in_service_peak, after.queued_peak) == (0, 0)
        return elapsed, totals.completed, totals.in_service_peak, totals.queued_peak

    models = {"*": ModelScenario(latency_ms=200)}
    elapsed, completed, in_service, queued = six_at_once(
        FakeScenario(models=models, capacity=2))
    assert completed == 6 and in_service == 2 and queued >= 1 and elapsed >= 0.6
    elapsed, completed, in_service, queued = six_at_once(FakeScenario(models=models))
    assert completed == 6 and (in_service, queued) == (0, 0)  # no capacity, no counting
    with pytest.raises(ValidationError):
        FakeScenario.model_validate({"capacity": 0})


def test_auth_required_and_the_key_never_echoed(caplog: pytest.LogCaptureFixture) -> None:
    secret, wrong = "sk-fake-SECRET-4242", "sk-wrong-WRONG-0001"
    scenario = FakeScenario(api_key=secret)  # type: ignore[arg-type]  # pydantic coerces str
    assert secret not in repr(scenario) and secret not in str(scenario.model_dump())
    caplog.set_level(logging.DEBUG)
    seen: list[str] = []
    with run_fake_server(scenario) as fake, httpx.Client(base_url=fake.base_url,
                                                         trust_env=False) as c:
        missing = chat(c, "anything")
        assert missing.status_code == 401
        assert missing.json()["error"]["code"] == "missing_api_key"
        bad = c.post("/chat/completions", json=_body("m", "x"),
                     headers={"authorization": f"Bearer {wrong}"})
        assert bad.status_code == 401 and bad.json()["error"]["code"] == "invalid_api_key"
        assert c.get("/models").status_code == 401
        good = c.post("/chat/completions", json=_body("m", "x"),
                      headers={"authorization": f"Bearer {secret}"})
        assert good.status_code == 200
        for r in (missing, bad, good):
            seen += [r.text, str(r.headers)]
        seen.append(json.dumps(fake.stats(per_key=True).model_dump()))
    seen.append(caplog.text)
    for text in seen:
        assert secret not in text and wrong not in text


def test_scenario_from_yaml_and_validation(tmp_path: Path) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(
        "models:\n"
        "  gpt-x:\n"
        "    returned_model: gpt-x-2025-01-01\n"
        "    latency_ms: {mean: 20, jitter: 5, seed: 7}\n"
        "    reply: template\n"
        "    template: '第{n}篇：{prompt}'\n"
        "faults:\n"
        "  - {kind: status, status: 429, retry_after: 1, first_attempts: 1, models: [gpt-x]}\n"
        "  - {kind: drop, rate: 0.01, seed: 3}\n", encoding="utf-8")
    scenario = FakeScenario.from_file(path)
    assert isinstance(scenario.faults[0], StatusFault) and isinstance(scenario.faults[1], DropFault)
    with run_fake_server(path) as fake, httpx.Client(base_url=fake.base_url,
                                                     trust_env=False) as c:
        assert chat(c, "gpt-x", "秋").status_code == 429
        r = chat(c, "gpt-x", "秋")
        assert _content(r) == "第1篇：秋" and r.json()["model"] == "gpt-x-2025-01-01"
    for bad in ({"models": {"m": {"colour": "red"}}},
                {"faults": [{"kind": "explode"}]},
                {"faults": [{"kind": "status", "status": 418}]},
                {"faults": [{"kind": "hang", "rate": 1.5}]},
                {"models": {"m": {"reply": "template", "template": "{essay}"}}},
                {"models": {"m": {"reply": "script"}}}):
        with pytest.raises(ValidationError):
            FakeScenario.model_validate(bad)


def test_subprocess_prints_listening_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    secret = "sk-subprocess-SECRET-77"
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"api_key_env": "FAKE_TEST_KEY",
                                "models": {"m": {"returned_model": "m-1"}}}), encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "essaybench.llm.fake", "--scenario", str(path),
         "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "FAKE_TEST_KEY": secret})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("LISTENING http://127.0.0.1:") and line.rstrip().endswith("/v1")
        base = line.split()[1]
        r = httpx.post(f"{base}/chat/completions", json=_body("m", "你好"), trust_env=False,
                       headers={"authorization": f"Bearer {secret}"})
        assert r.status_code == 200 and r.json()["model"] == "m-1"
        assert httpx.post(f"{base}/chat/completions", json=_body("m", "x"),
                          trust_env=False).status_code == 401
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0
    assert secret not in out + err


def test_spawn_fake_server(tmp_path: Path) -> None:
    scenario = FakeScenario(api_key="sk-spawn-SECRET",  # type: ignore[arg-type]
                            models={"m": ModelScenario()},
                            faults=(StatusFault(status=503, first_attempts=1),))
    with spawn_fake_server(scenario) as fake:
        assert fake.base_url.startswith("http://127.0.0.1:") and fake.base_url.endswith("/v1")
        headers = {"authorization": "Bearer sk-spawn-SECRET"}
        with httpx.Client(base_url=fake.base_url, trust_env=False, headers=headers) as c:
            assert chat(c, "m", "一").status_code == 503
            assert _content(chat(c, "m", "一")) == "一"
        stats = fake.stats()
        assert stats.totals.received == 2 and stats.completed_per_key["1"] == 1
        # cpu_s is the server process's own: CPU this process burns does not show in it.
        _burn_cpu(0.3)
        assert 0 < fake.stats().totals.cpu_s - stats.totals.cpu_s < 0.2
    with pytest.raises(httpx.ConnectError):  # terminated on exit
        httpx.get(f"{fake.root_url}/health", trust_env=False)
