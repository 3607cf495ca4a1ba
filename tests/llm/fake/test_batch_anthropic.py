"""The fake's Anthropic Message Batches API, driven with plain httpx against the real server."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server

jsonschema = pytest.importorskip("jsonschema")

SCHEMA = {"type": "object", "additionalProperties": False,
          "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 10},
                         "nonce": {"type": "string", "enum": ["n-42"]}},
          "required": ["score", "nonce"]}


def params(text: str, model: str = "claude-fake", **extra: Any) -> dict[str, Any]:
    return {"model": model, "max_tokens": 200, "system": "你是作文老师。",
            "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}], **extra}


def req(custom_id: str, p: Any) -> dict[str, Any]:
    return {"custom_id": custom_id, "params": p}


@pytest.fixture
def serve() -> Iterator[Any]:
    stack: list[Any] = []

    def start(batch: dict[str, Any] | None = None, **scenario: Any) -> tuple[
            FakeServerHandle, httpx.Client]:
        cm = run_fake_server(FakeScenario.model_validate({"batch": batch or {}, **scenario}))
        handle = cm.__enter__()
        stack.append(cm)
        client = httpx.Client(base_url=handle.base_url, timeout=5, trust_env=False,
                              headers={"anthropic-version": "2023-06-01"})
        stack.append(client)
        return handle, client

    yield start
    for item in reversed(stack):
        item.__exit__(None, None, None)


def create(client: httpx.Client, requests: list[Any]) -> dict[str, Any]:
    r = client.post("/messages/batches", json={"requests": requests})
    assert r.status_code == 200, r.text
    batch: dict[str, Any] = r.json()
    assert batch["type"] == "message_batch" and batch["processing_status"] == "in_progress"
    assert batch["results_url"] is None and batch["id"].startswith("msgbatch_")
    return batch


def poll(client: httpx.Client, batch_id: str, timeout: float = 10) -> tuple[
        dict[str, Any], list[str]]:
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch: dict[str, Any] = client.get(f"/messages/batches/{batch_id}").json()
        if not seen or seen[-1] != batch["processing_status"]:
            seen.append(batch["processing_status"])
        if batch["processing_status"] == "ended":
            return batch, seen
        time.sleep(0.02)
    raise AssertionError(f"batch {batch_id} never ended: {seen}")


def results(client: httpx.Client, batch: dict[str, Any]) -> dict[str, dict[str, Any]]:
    r = client.get(batch["results_url"])
    assert r.status_code == 200
    rows = [json.loads(x) for x in r.text.splitlines()]
    out = {row["custom_id"]: row["result"] for row in rows}
    assert len(out) == len(rows)
    return out


def as_chat(p: dict[str, Any]) -> dict[str, Any]:
    """What a direct chat call with the same request sends (independent of the fake's code)."""
    text = "".join(b["text"] for b in p["messages"][0]["content"])
    chat = {"model": p["model"], "messages": [{"role": "system", "content": p["system"]},
                                              {"role": "user", "content": text}],
            "max_tokens": p["max_tokens"]}
    if "output_config" in p:
        chat["response_format"] = {"type": "json_schema", "json_schema": {
            "name": "output", "schema": p["output_config"]["format"]["schema"]}}
    return chat


def test_round_trip_gives_what_direct_calls_give(serve: Any) -> None:
    fake, client = serve({"delay_s": 0.5, "per_item_s": 0.02},
                         models={"claude-fake": {"cache_report": "openai"}})
    structured = {"format": {"type": "json_schema", "schema": SCHEMA}}
    requests = [req(f"r{i}", params(f"写一篇作文{i}")) for i in range(4)]
    requests.append(req("judge", params("评分", output_config=structured)))
    batch, seen = poll(client, create(client, requests)["id"])
    assert seen[0] == "in_progress" and seen[-1] == "ended"
    assert batch["request_counts"] == {"processing": 0, "succeeded": 5, "errored": 0,
                                       "canceled": 0, "expired": 0}
    assert batch["ended_at"] >= batch["created_at"]
    out = results(client, batch)
    assert set(out) == {r["custom_id"] for r in requests}
    for r in requests:
        message = out[r["custom_id"]]["message"]
        assert message["type"] == "message" and message["stop_reason"] == "end_turn"
        direct = client.post("/chat/completions", json=as_chat(r["params"])).json()
        assert message["content"] == [{"type": "text",
                                       "text": direct["choices"][0]["message"]["content"]}]
        cached = direct["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert cached > 0 and message["usage"]["cache_read_input_tokens"] == cached
        assert (message["usage"]["input_tokens"], message["usage"]["output_tokens"]) == (
            direct["usage"]["prompt_tokens"] - cached, direct["usage"]["completion_tokens"])
    verdict = json.loads(out["judge"]["message"]["content"][0]["text"])
    jsonschema.validate(verdict, SCHEMA)
    assert verdict["nonce"] == "n-42"
    stats = fake.stats()
    assert stats.batch is not None
    assert (stats.batch.batches_created, stats.batch.lines_received,
            stats.batch.results_served, stats.batch.files_uploaded) == (1, 5, 5, 0)
    assert stats.batch.per_model == {"claude-fake": {"received": 5, "completed": 5}}
    assert stats.totals.received == 5  # the direct calls above, counted apart


def test_partial_failure_and_bad_params_are_errored_results(serve: Any) -> None:
    _, client = serve({"fail": {"custom_ids": ["r1"], "status": 503}})
    requests = [req(f"r{i}", params(f"作文{i}")) for i in range(3)]
    requests += [req("no-max", {"model": "claude-fake", "messages": [
                     {"role": "user", "content": "甲"}]}),
                 req("image", params("乙") | {"messages": [{"role": "user", "content": [
                     {"type": "image", "source": {}}]}]}),
                 req("unknown", params("丙") | {"model": 7})]
    batch, _ = poll(client, create(client, requests)["id"])
    assert batch["request_counts"]["succeeded"] == 2 and batch["request_counts"]["errored"] == 4
    out = results(client, batch)
    errors = {k: v["error"]["error"] for k, v in out.items() if v["type"] == "errored"}
    assert errors["r1"]["type"] == "overloaded_error"
    assert errors["no-max"] == {"type": "invalid_request_error",
                                "message": "params.max_tokens: Field required (an integer >= 1)"}
    assert "params.messages.0.content" in errors["image"]["message"]
    assert "params.model" in errors["unknown"]["message"]
    assert all(v["error"]["type"] == "error" for v in out.values() if v["type"] == "errored")


def test_expiry_and_results_before_the_end(serve: Any) -> None:
    _, client = serve({"per_item_s": 0.1, "window_s": 0.25})
    batch_id = create(client, [req(f"r{i}", params(f"作文{i}")) for i in range(5)])["id"]
    early = client.get(f"/messages/batches/{batch_id}/results")
    assert early.status_code == 400 and early.json()["type"] == "error"
    batch, _ = poll(client, batch_id)
    assert batch["request_counts"] == {"processing": 0, "succeeded": 2, "errored": 0,
                                       "canceled": 0, "expired": 3}
    out = results(client, batch)
    assert {k: v["type"] for k, v in out.items()} == {
        "r0": "succeeded", "r1": "succeeded", "r2": "expired", "r3": "expired",
        "r4": "expired"}


def test_cancel_mid_way(serve: Any) -> None:
    fake, client = serve({"per_item_s": 0.1, "cancel_s": 0.2})
    batch_id = create(client, [req(f"r{i}", params(f"作文{i}")) for i in range(50)])["id"]
    while client.get(f"/messages/batches/{batch_id}").json()[
            "request_counts"]["succeeded"] < 2:
        time.sleep(0.02)
    canceling = client.post(f"/messages/batches/{batch_id}/cancel").json()
    assert canceling["processing_status"] == "canceling"
    assert canceling["cancel_initiated_at"] is not None
    batch, _ = poll(client, batch_id)
    counts = batch["request_counts"]
    assert counts["succeeded"] >= 2 and counts["canceled"] >= 1
    assert counts["succeeded"] + counts["canceled"] == 50
    out = results(client, batch)
    assert sum(v["type"] == "canceled" for v in out.values()) == counts["canceled"]
    assert client.post(f"/messages/batches/{batch_id}/cancel").status_code == 400
    stats = fake.stats()
    assert stats.batch is not None and stats.batch.cancels == 1
    assert stats.batch.per_model["claude-fake"]["received"] == counts["succeeded"]


@pytest.mark.parametrize(("body", "where"), [
    ({"requests": [req("a", params("甲")), req("a", params("乙"))]}, "requests.1.custom_id"),
    ({"requests": [req("a b", params("甲"))]}, "requests.0.custom_id"),
    ({"requests": [req("x" * 65, params("甲"))]}, "requests.0.custom_id"),
    ({"requests": [{"custom_id": "a"}]}, "requests.0.params"),
    ({"requests": [["a"]]}, "requests.0.custom_id"),
    ({"requests": []}, "requests"),
    ([1, 2], "requests"),
])
def test_create_rejects_a_bad_request_list(serve: Any, body: Any, where: str) -> None:
    fake, client = serve()
    r = client.post("/messages/batches", json=body)
    assert r.status_code == 400
    error = r.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert error["error"]["message"].startswith(where)
    stats = fake.stats()
    assert stats.batch is not None and stats.batch.batches_created == 0


def test_whole_batch_refusal_unknown_ids_and_auth(serve: Any) -> None:
    _, client = serve({"fail_first_batches": 1}, api_key="sk-ant-fake")
    assert client.get("/messages/batches").status_code == 401
    client.headers["x-api-key"] = "sk-ant-fake"
    refused = client.post("/messages/batches", json={"requests": [req("a", params("甲"))]})
    assert refused.status_code == 429 and refused.json()["error"]["type"] == "rate_limit_error"
    batch = create(client, [req("a", params("甲"))])
    missing = client.get("/messages/batches/msgbatch_nope")
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"
    assert client.post("/messages/batches", content=b"{").status_code == 400
    poll(client, batch["id"])
    listed = client.get("/messages/batches").json()
    assert [b["id"] for b in listed["data"]] == [batch["id"]] and not listed["has_more"]


def test_a_new_client_resumes_polling_the_same_batch(serve: Any) -> None:
    fake, client = serve({"delay_s": 0.3})
    batch_id = create(client, [req("k", params("续"))])["id"]
    client.close()
    with httpx.Client(base_url=fake.base_url, trust_env=False) as fresh:
        batch, _ = poll(fresh, batch_id)
        assert results(fresh, batch)["k"]["type"] == "succeeded"


def test_hostile_create_bodies_get_a_400_never_a_500(serve: Any) -> None:
    fake, client = serve()
    good = json.dumps({"requests": [req("a", params("甲")), req("b", params("乙"))]}).encode()
    bodies = [b"[" * 100_000, good.replace(b"200", b"NaN"), b"\xff\xfe", b"null",
              json.dumps({"requests": [req("a", [[[[]]]])]}).encode()]
    rng = random.Random(26)
    for _ in range(30):
        mutated = bytearray(good)
        for _ in range(rng.randint(1, 6)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        bodies.append(bytes(mutated))
    for data in bodies:
        r = client.post("/messages/batches", content=data,
                        headers={"content-type": "application/json"})
        assert r.status_code in (200, 400), (r.status_code, data[:80])
        if r.status_code == 200:
            batch, _ = poll(client, r.json()["id"])
            assert sum(batch["request_counts"].values()) == 2
    stats = fake.stats()
    assert stats.batch is not None and "internal_error" not in stats.batch.faults
