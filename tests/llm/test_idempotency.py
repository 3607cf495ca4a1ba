"""Idempotency-Key: a call re-sent within its run (a crashed shard's, sent again by another
attempt with none of the first's ledger) is charged once by a provider that honours the
header; another run, or an entry with the header off, pays again. Against the fake on
loopback, whose record of answers is what such a provider keeps (fake/idempotency.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from essaybench.llm.client import idempotency_header, idempotency_token, token_of_header
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.llm.gateway import Gateway
from essaybench.llm.ledger import Ledger
from essaybench.llm.retry import Backoff
from essaybench.llm.scope import ANY_RUN, ReuseScope
from essaybench.llm.types import ChatRequest, ChatResult, Message
from tests.llm.conftest import fake_spec, registry_of

FAST = Backoff(base_s=0.01, cap_s=0.05)
HONOURS = FakeScenario.model_validate({"honour_idempotency_key": True})


def _requests(n: int) -> list[ChatRequest]:
    return [ChatRequest(model="fake", stage="generate", tag=f"p{i}",
                        params={"temperature": 0.8},
                        messages=(Message(role="user", content=f"第{i}题：写一篇短文"),))
            for i in range(n)]


def _attempt(server: FakeServerHandle, ledger_path: Path, requests: list[ChatRequest],
             scope: ReuseScope, **spec: Any) -> list[ChatResult]:
    """One attempt with a ledger of its own (as a re-sent shard whose parts were lost)."""
    async def main() -> list[ChatResult]:
        with Ledger(ledger_path) as ledger:
            gateway = Gateway(registry_of(fake_spec(**spec)), ledger, scope=scope,
                              base_urls={"fake": server.base_url}, backoff=FAST, seed=0)
            return await gateway.run(requests)
    return asyncio.run(main())


def test_a_call_resent_within_its_run_is_charged_once(tmp_path: Path) -> None:
    run = ReuseScope.of_run("run-1")
    with run_fake_server(HONOURS) as server:
        first = _attempt(server, tmp_path / "a.duckdb", _requests(12), run)
        again = _attempt(server, tmp_path / "b.duckdb", _requests(12), run)
        stats = server.stats()
    assert all(r.ok and not r.from_ledger for r in again)  # sent, not served by a ledger
    assert [r.text for r in again] == [r.text for r in first]
    assert stats.totals.received == 12 and stats.totals.completed == 12
    assert stats.totals.replayed == 12


@pytest.mark.parametrize("second", ["another run", "header off", "provider ignores it"])
def test_otherwise_the_call_is_paid_again(tmp_path: Path, second: str) -> None:
    run, spec = ReuseScope.of_run("run-1"), {}
    scenario = HONOURS
    if second == "another run":  # next week's run must pay for its own measurement
        run2 = ReuseScope.of_run("run-2")
    else:
        run2 = run
        if second == "header off":
            spec = {"idempotency_key": False}
        else:
            scenario = FakeScenario()
    with run_fake_server(scenario) as server:
        _attempt(server, tmp_path / "a.duckdb", _requests(6), run, **spec)
        _attempt(server, tmp_path / "b.duckdb", _requests(6), run2, **spec)
        stats = server.stats(per_key=True)
    assert stats.totals.completed == 12 and stats.totals.replayed == 0
    # The fake counts the tokens it saw, honoured or not: a ledger row's requests are found.
    expected = {"another run": [1] * 12, "header off": [], "provider ignores it": [2] * 6}
    assert sorted((stats.per_token or {}).values()) == expected[second]


def test_no_header_without_a_run(tmp_path: Path) -> None:
    """A bare gateway (a script, curation's labeller) records calls under no run."""
    with run_fake_server(HONOURS) as server:
        _attempt(server, tmp_path / "a.duckdb", _requests(4), ANY_RUN)
        _attempt(server, tmp_path / "b.duckdb", _requests(4), ANY_RUN)
        assert server.stats().totals.replayed == 0


def test_a_resend_while_the_first_is_still_answered_waits_for_it(tmp_path: Path) -> None:
    """The client of the first request is gone (killed mid-call); the provider finishes it
    and keeps the answer; the re-send, arriving meanwhile, gets that answer uncharged."""
    slow = FakeScenario.model_validate({"honour_idempotency_key": True,
                                        "models": {"*": {"latency_ms": 400}}})
    body = {"model": "m", "messages": [{"role": "user", "content": "写一篇短文"}]}
    headers = {"Idempotency-Key": "eb-test-r0"}

    async def main(url: str) -> tuple[httpx.Response, float]:
        async with httpx.AsyncClient() as client:
            first = asyncio.create_task(client.post(url, json=body, headers=headers))
            await asyncio.sleep(0.1)
            first.cancel()  # the connection closes with no reply read
            started = asyncio.get_running_loop().time()
        async with httpx.AsyncClient() as client:
            second = await client.post(url, json=body, headers=headers)
        return second, asyncio.get_running_loop().time() - started

    with run_fake_server(slow) as server:
        reply, waited = asyncio.run(main(server.base_url + "/chat/completions"))
        stats = server.stats(per_key=True)
    assert reply.status_code == 200 and reply.headers["idempotent-replayed"] == "true"
    assert 0.2 < waited < 2.0  # it waited for the first answer rather than making its own
    assert json.loads(reply.content)["choices"][0]["message"]["content"]
    assert stats.totals.received == 1 and stats.totals.replayed == 1
    assert stats.totals.completed == 0  # the first's reply went to a closed connection


def test_a_key_reused_with_another_body_is_refused() -> None:
    with run_fake_server(HONOURS) as server:
        url = server.base_url + "/chat/completions"
        headers = {"Idempotency-Key": "eb-test-r0"}
        with httpx.Client() as client:
            ok = client.post(url, headers=headers, json={
                "model": "m", "messages": [{"role": "user", "content": "一"}]})
            bad = client.post(url, headers=headers, json={
                "model": "m", "messages": [{"role": "user", "content": "二"}]})
        stats = server.stats()
    assert ok.status_code == 200
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "idempotency_key_reused"
    assert stats.totals.received == 1 and stats.totals.rejected == 1


def test_a_failed_answer_is_not_kept() -> None:
    """A fault leaves the key free: the retry is answered afresh, not with the failure."""
    scenario = FakeScenario.model_validate({"honour_idempotency_key": True, "faults": [
        {"kind": "status", "status": 503, "first_attempts": 1}]})
    with run_fake_server(scenario) as server:
        url = server.base_url + "/chat/completions"
        body = {"model": "m", "messages": [{"role": "user", "content": "写"}]}
        with httpx.Client() as client:
            codes = [client.post(url, json=body, headers={"Idempotency-Key": "k-r0"}).status_code
                     for _ in range(3)]
        stats = server.stats()
    assert codes == [503, 200, 200]
    assert stats.totals.received == 2 and stats.totals.replayed == 1


def test_tokens_name_the_run_the_call_and_the_reask() -> None:
    token = idempotency_token("run-1", "k" * 64)
    assert token == idempotency_token("run-1", "k" * 64)
    assert token != idempotency_token("run-2", "k" * 64)
    assert token != idempotency_token("run-1", "j" * 64)
    assert idempotency_header(token, 0) != idempotency_header(token, 1)
    assert len(idempotency_header(token, 10)) <= 255 and "run-1" not in token
    assert token_of_header(idempotency_header(token, 10)) == token
