"""The fake's OpenAI Batch API, driven with plain httpx against the real server on loopback."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from essaybench.llm.fake.scenario import FakeScenario, StatusFault
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server

jsonschema = pytest.importorskip("jsonschema")

CHAT = "/v1/chat/completions"
SCHEMA = {"type": "object", "additionalProperties": False,
          "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 10},
                         "reason": {"type": "string", "maxLength": 20}},
          "required": ["score", "reason"]}
TERMINAL = {"completed", "failed", "expired", "cancelled"}


def body(text: str, model: str = "w", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "system", "content": "你是作文老师。"},
                                         {"role": "user", "content": text}], **extra}


def line(custom_id: str, payload: dict[str, Any], url: str = CHAT) -> dict[str, Any]:
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": payload}


def jsonl(rows: list[Any]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()


@pytest.fixture
def serve() -> Iterator[Any]:
    """serve({...batch scenario...}) -> (handle, client); everything closed at the end."""
    stack: list[Any] = []

    def start(batch: dict[str, Any] | None = None, **scenario: Any) -> tuple[
            FakeServerHandle, httpx.Client]:
        sc = FakeScenario.model_validate({"batch": batch or {}, **scenario})
        cm = run_fake_server(sc)
        handle = cm.__enter__()
        stack.append(cm)
        client = httpx.Client(base_url=handle.base_url, timeout=5, trust_env=False)
        stack.append(client)
        return handle, client

    yield start
    for item in reversed(stack):
        item.__exit__(None, None, None)


def upload(client: httpx.Client, data: bytes, name: str = "in.jsonl") -> str:
    r = client.post("/files", files={"file": (name, data)}, data={"purpose": "batch"})
    assert r.status_code == 200, r.text
    assert r.json()["purpose"] == "batch" and r.json()["bytes"] == len(data)
    return str(r.json()["id"])


def create(client: httpx.Client, rows: list[Any]) -> dict[str, Any]:
    r = client.post("/batches", json={"input_file_id": upload(client, jsonl(rows)),
                                      "endpoint": CHAT, "completion_window": "24h"})
    assert r.status_code == 200, r.text
    batch: dict[str, Any] = r.json()
    assert batch["status"] == "validating" and batch["object"] == "batch"
    return batch


def poll(client: httpx.Client, batch_id: str, timeout: float = 10) -> tuple[
        dict[str, Any], list[str]]:
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch: dict[str, Any] = client.get(f"/batches/{batch_id}").json()
        if not seen or seen[-1] != batch["status"]:
            seen.append(batch["status"])
        if batch["status"] in TERMINAL:
            return batch, seen
        time.sleep(0.02)
    raise AssertionError(f"batch {batch_id} never ended: {seen}")


def results(client: httpx.Client, file_id: str | None) -> dict[str, dict[str, Any]]:
    if file_id is None:
        return {}
    r = client.get(f"/files/{file_id}/content")
    assert r.status_code == 200
    rows = [json.loads(x) for x in r.text.splitlines()]
    out = {row["custom_id"]: row for row in rows}
    assert len(out) == len(rows)
    return out


def test_round_trip_gives_what_direct_calls_give(serve: Any) -> None:
    fake, client = serve({"delay_s": 0.5, "per_item_s": 0.02},
                         models={"w": {"cache_report": "openai"}})
    structured = {"type": "json_schema", "json_schema": {"name": "s", "schema": SCHEMA}}
    rows = [line(f"c{i}", body(f"写一篇作文{i}")) for i in range(5)]
    rows.append(line("judge", body("评分", response_format=structured)))
    batch, seen = poll(client, create(client, rows)["id"])
    assert seen[0] in ("validating", "in_progress") and seen[-1] == "completed"
    assert batch["request_counts"] == {"total": 6, "completed": 6, "failed": 0}
    assert batch["error_file_id"] is None and batch["completed_at"] >= batch["created_at"]
    out = results(client, batch["output_file_id"])
    assert set(out) == {r["custom_id"] for r in rows}
    assert list(out) != [r["custom_id"] for r in rows]  # order unrelated to the input's
    for row in rows:
        got = out[row["custom_id"]]
        assert got["error"] is None and got["response"]["status_code"] == 200
        direct = client.post("/chat/completions", json=row["body"]).json()
        assert (got["response"]["body"]["choices"][0]["message"]
                == direct["choices"][0]["message"])
        assert got["response"]["body"]["usage"] == direct["usage"]
        assert direct["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    jsonschema.validate(json.loads(
        out["judge"]["response"]["body"]["choices"][0]["message"]["content"]), SCHEMA)
    stats = fake.stats()
    assert stats.batch is not None
    assert (stats.batch.files_uploaded, stats.batch.batches_created,
            stats.batch.lines_received, stats.batch.results_served) == (1, 1, 6, 6)
    assert stats.batch.per_model == {"w": {"received": 6, "completed": 6}}
    assert stats.totals.received == 6 and stats.per_model["w"].received == 6  # direct: apart


def test_partial_failure_and_fault_rules(serve: Any) -> None:
    fake, client = serve({"fail": {"custom_ids": ["c1"], "status": 500}},
                         faults=[{"kind": "status", "status": 429, "first_attempts": 1,
                                  "models": ["flaky"]}])
    rows = [line(f"c{i}", body(f"作文{i}")) for i in range(4)]
    rows.append(line("bad", {"model": "w", "messages": "not a list"}))
    batch, _ = poll(client, create(client, rows)["id"])
    assert batch["status"] == "completed"
    assert batch["request_counts"] == {"total": 5, "completed": 3, "failed": 2}
    errors = results(client, batch["error_file_id"])
    assert {k: v["response"]["status_code"] for k, v in errors.items()} == {"c1": 500, "bad": 400}
    assert all(v["error"] is None and "error" in v["response"]["body"] for v in errors.values())
    assert set(results(client, batch["output_file_id"])) == {"c0", "c2", "c3"}
    flaky = line("f", body("限流", model="flaky"))  # one model per batch
    batch, _ = poll(client, create(client, [flaky])["id"])
    assert results(client, batch["error_file_id"])["f"]["response"]["status_code"] == 429
    # The fault's attempt count spans batch and direct arrivals: the direct re-send passes.
    assert client.post("/chat/completions", json=flaky["body"]).status_code == 200
    stats = fake.stats()
    assert stats.batch is not None and stats.batch.faults == {"batch_item": 1, "status": 1}
    assert stats.batch.by_kind == {"errored": 3, "succeeded": 3}


def test_expiry_at_the_window_end(serve: Any) -> None:
    fake, client = serve({"per_item_s": 0.1, "window_s": 0.35})
    rows = [line(f"c{i}", body(f"作文{i}")) for i in range(6)]
    batch, seen = poll(client, create(client, rows)["id"])
    assert batch["status"] == "expired" and "in_progress" in seen
    assert batch["request_counts"] == {"total": 6, "completed": 3, "failed": 3}
    assert set(results(client, batch["output_file_id"])) == {"c0", "c1", "c2"}
    errors = results(client, batch["error_file_id"])
    assert {k: (v["response"], v["error"]["code"]) for k, v in errors.items()} == {
        f"c{i}": (None, "batch_expired") for i in (3, 4, 5)}
    stats = fake.stats()
    assert stats.batch is not None and stats.batch.per_model["w"]["received"] == 3


def test_a_batch_held_for_polls_answers_nothing_until_read_that_often(serve: Any) -> None:
    """``in_progress_polls``: a wait counted in status reads, not seconds (a slow client
    still sees it open for exactly that many polls); a cancel still ends it."""
    fake, client = serve({"in_progress_polls": 2})
    batch_id = create(client, [line(f"c{i}", body(f"作文{i}")) for i in range(3)])["id"]
    time.sleep(0.3)  # time alone answers nothing
    first = client.get(f"/batches/{batch_id}").json()
    assert first["status"] == "in_progress" and first["request_counts"]["completed"] == 0
    second = client.get(f"/batches/{batch_id}").json()  # the second read releases it
    assert second["status"] == "in_progress" and second["request_counts"]["completed"] == 0
    batch, _ = poll(client, batch_id)
    assert batch["status"] == "completed" and batch["request_counts"]["completed"] == 3
    stats = fake.stats()
    assert stats.batch is not None and stats.batch.per_model["w"]["received"] == 3

    held = create(client, [line("c9", body("作文9"))])["id"]
    assert client.post(f"/batches/{held}/cancel").status_code == 200
    cancelled, _ = poll(client, held)
    assert cancelled["status"] == "cancelled" and cancelled["request_counts"]["completed"] == 0


def test_cancel_mid_way_keeps_what_was_answered(serve: Any) -> None:
    fake, client = serve({"per_item_s": 0.1, "cancel_s": 0.2})
    rows = [line(f"c{i}", body(f"作文{i}")) for i in range(50)]
    batch_id = create(client, rows)["id"]
    while client.get(f"/batches/{batch_id}").json()["request_counts"]["completed"] < 2:
        time.sleep(0.02)
    cancelling = client.post(f"/batches/{batch_id}/cancel")
    assert cancelling.status_code == 200 and cancelling.json()["status"] == "cancelling"
    batch, _ = poll(client, batch_id)
    assert batch["status"] == "cancelled" and batch["cancelled_at"] is not None
    done = set(results(client, batch["output_file_id"]))
    errors = results(client, batch["error_file_id"])
    assert 2 <= len(done) < 50 and len(done) + len(errors) == 50
    assert {e["error"]["code"] for e in errors.values()} == {"batch_cancelled"}
    assert client.post(f"/batches/{batch_id}/cancel").status_code == 400  # ended
    stats = fake.stats()
    assert stats.batch is not None and stats.batch.cancels == 1
    assert stats.batch.per_model["w"]["received"] == len(done)


def test_provider_cancel_and_whole_batch_failure(serve: Any) -> None:
    fake, client = serve({"cancel_after_items": 2, "fail_first_batches": 1})
    rows = [line(f"c{i}", body(f"作文{i}")) for i in range(5)]
    first, _ = poll(client, create(client, rows)["id"])
    assert first["status"] == "failed" and first["request_counts"]["total"] == 0
    assert [e["code"] for e in first["errors"]["data"]] == ["token_limit_exceeded"]
    second, _ = poll(client, create(client, rows)["id"])
    assert second["status"] == "cancelled"
    assert set(results(client, second["output_file_id"])) == {"c0", "c1"}
    stats = fake.stats()
    assert stats.batch is not None
    assert (stats.batch.provider_cancels, stats.batch.cancels) == (1, 0)
    assert stats.batch.by_end == {"cancelled": 1, "failed": 1}
    assert stats.batch.batches_per_custom_id == {"1": 5}  # the failed batch took no lines


def test_validation_failure_names_each_bad_line(serve: Any) -> None:
    fake, client = serve()
    good = line("a", body("甲"))
    data = (jsonl([good]) + b"{not json\n" + jsonl([
        line("b", body("乙"), url="/v1/embeddings"), line("a", body("丙")),
        line("c", body("丁", model="other")), {"custom_id": "d", "method": "GET", "url": CHAT},
        [1, 2]]) + b"\xff\xfe\n")
    r = client.post("/batches", json={"input_file_id": upload(client, data), "endpoint": CHAT,
                                      "completion_window": "24h"})
    batch, _ = poll(client, r.json()["id"])
    assert batch["status"] == "failed" and batch["failed_at"] is not None
    assert [(e["line"], e["code"]) for e in batch["errors"]["data"]] == [
        (2, "invalid_json_line"), (3, "url_mismatch"), (4, "duplicate_custom_id"),
        (5, "model_mismatch"), (6, "invalid_method"), (7, "invalid_json_line"),
        (8, "invalid_json_line")]
    assert batch["errors"]["data"][0]["message"] == "This line is not parseable as valid JSON."
    stats = fake.stats()
    assert stats.batch is not None and stats.batch.lines_received == 0
    assert stats.batch.per_model == {} and stats.totals.received == 0


@pytest.mark.parametrize(("request_body", "status", "param"), [
    ({"endpoint": "/v1/embeddings", "completion_window": "24h"}, 400, "endpoint"),
    ({"endpoint": "/v2/nope", "completion_window": "24h"}, 400, "endpoint"),
    ({"endpoint": CHAT, "completion_window": "1h"}, 400, "completion_window"),
    ({"endpoint": CHAT, "completion_window": "24h", "input_file_id": "file-nope"}, 404,
     "input_file_id"),
    ({"endpoint": CHAT, "completion_window": "24h", "metadata": {"k": 1}}, 400, "metadata"),
])
def test_create_rejects_in_openai_error_shape(serve: Any, request_body: dict[str, Any],
                                              status: int, param: str) -> None:
    _, client = serve()
    request_body.setdefault("input_file_id", upload(client, jsonl([line("a", body("甲"))])))
    r = client.post("/batches", json=request_body)
    assert r.status_code == status and r.json()["error"]["param"] == param
    assert r.json()["error"]["type"] == "invalid_request_error"


def test_hostile_uploads_get_4xx_never_500(serve: Any) -> None:
    _, client = serve({"max_file_bytes": 1000, "max_lines": 3})
    assert client.post("/files", files={"file": ("x.txt", b"{}")},
                       data={"purpose": "batch"}).status_code == 400
    assert client.post("/files", files={"file": ("x.jsonl", b"{}")},
                       data={"purpose": "fine-tune"}).status_code == 400
    assert client.post("/files", data={"purpose": "batch"}).status_code == 400
    assert client.post("/files", content=b"--zz\r\ngarbage", headers={
        "content-type": "multipart/form-data; boundary=zz"}).status_code == 400
    assert client.post("/files", files={"file": ("x.jsonl", b"x" * 2000)},
                       data={"purpose": "batch"}).status_code == 413
    assert client.post("/batches", content=b"\xff").status_code == 400
    too_many = upload(client, jsonl([line(f"c{i}", body("甲")) for i in range(4)]))
    empty = upload(client, b"")
    for file_id, code in ((too_many, "too_many_tasks"), (empty, "empty_file")):
        r = client.post("/batches", json={"input_file_id": file_id, "endpoint": CHAT,
                                          "completion_window": "24h"})
        batch, _ = poll(client, r.json()["id"])
        assert [e["code"] for e in batch["errors"]["data"]] == [code]
    assert client.get("/batches/batch_nope").status_code == 404
    assert client.get("/files/file-nope/content").status_code == 404


def test_a_killed_client_resumes_polling_from_a_new_connection(serve: Any) -> None:
    fake, client = serve({"delay_s": 0.3})
    script = (
        "import httpx, json, os, signal, sys\n"
        "c = httpx.Client(base_url=sys.argv[1], trust_env=False)\n"
        "row = {'custom_id': 'k', 'method': 'POST', 'url': '/v1/chat/completions',\n"
        "       'body': {'model': 'w', 'messages': [{'role': 'user', 'content': '续'}]}}\n"
        "f = c.post('/files', files={'file': ('a.jsonl', json.dumps(row).encode())},\n"
        "           data={'purpose': 'batch'}).json()['id']\n"
        "b = c.post('/batches', json={'input_file_id': f, 'endpoint': '/v1/chat/completions',\n"
        "                             'completion_window': '24h'}).json()['id']\n"
        "print(b, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", script, fake.base_url], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "NO_PROXY": "*"})
    assert proc.returncode == -signal.SIGKILL
    batch_id = proc.stdout.strip()
    batch, _ = poll(client, batch_id)
    listed = client.get("/batches", params={"limit": 5}).json()
    assert [b["id"] for b in listed["data"]] == [batch_id]
    assert batch["status"] == "completed" and set(results(client, batch["output_file_id"])) == {
        "k"}
    fake.reset()  # zeroes counters, keeps batches and files
    stats = fake.stats()
    assert stats.batch is not None and stats.batch.batches_created == 0
    assert client.get(f"/batches/{batch_id}").json()["status"] == "completed"


def test_resubmitted_custom_ids_show_in_the_counters(serve: Any) -> None:
    fake, client = serve()
    rows = [line(f"c{i}", body(f"作文{i}")) for i in range(3)]
    poll(client, create(client, rows)["id"])
    poll(client, create(client, rows[:1])["id"])
    stats = httpx.get(f"{fake.root_url}/_fake/stats?per_key=1", trust_env=False).json()["batch"]
    assert stats["batches_per_custom_id"] == {"1": 2, "2": 1}
    assert stats["per_custom_id"] == {"c0": 2, "c1": 1, "c2": 1}
    assert stats["received_per_key"] == {"1": 2, "2": 1}


def test_batch_routes_need_the_key(serve: Any) -> None:
    _, client = serve(api_key="sk-fake-batch")
    assert client.get("/batches").status_code == 401
    assert client.post("/files", data={"purpose": "batch"}).status_code == 401
    keyed = httpx.Client(base_url=client.base_url, trust_env=False,
                         headers={"authorization": "Bearer sk-fake-batch"})
    with keyed:
        assert keyed.get("/batches").json()["data"] == []


def test_status_fault_rules_apply_per_line(serve: Any) -> None:
    _, client = serve(faults=[StatusFault(status=503, models=("down",)).model_dump()])
    batch, _ = poll(client, create(client, [line("x", body("甲", model="down"))])["id"])
    errors = results(client, batch["error_file_id"])
    assert errors["x"]["response"]["status_code"] == 503


def test_fuzzed_input_files_end_as_failed_or_completed(serve: Any) -> None:
    """Untrusted JSONL: byte flips, NaN, deep nesting. Never a 500, never a stuck batch."""
    fake, client = serve()
    rng = random.Random(26)
    valid = jsonl([line(f"c{i}", body(f"作文{i}", max_tokens=50)) for i in range(4)])
    files = [valid.replace(b"50", b"NaN"), b"[" * 100_000 + b"\n",
             jsonl([line("d", {"model": "w", "messages": [{"role": "user",
                                                           "content": [[[[1]]]]}]})])]
    for _ in range(30):
        mutated = bytearray(valid)
        for _ in range(rng.randint(1, 6)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        files.append(bytes(mutated))
    for data in files:
        r = client.post("/batches", json={"input_file_id": upload(client, data),
                                          "endpoint": CHAT, "completion_window": "24h"})
        assert r.status_code == 200, r.text
        batch, _ = poll(client, r.json()["id"])
        assert batch["status"] in ("failed", "completed")
        lines = data.count(b"\n")
        for error in (batch["errors"] or {"data": []})["data"]:
            assert error["line"] is None or 1 <= error["line"] <= lines
        counts = batch["request_counts"]
        assert counts["completed"] + counts["failed"] == counts["total"]
    stats = fake.stats()
    assert stats.batch is not None and "internal_error" not in stats.batch.faults
