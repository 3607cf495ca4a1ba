"""Gateway = registry + backends + ledger: nothing paid twice, everything recorded."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.llm.gateway import Gateway
from essaybench.llm.ledger import Ledger
from essaybench.llm.registry import ApiKeyMissingError
from essaybench.llm.retry import Backoff
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message
from essaybench.store import StoreBusyError
from tests.llm.conftest import fake_spec, registry_of

FAST = Backoff(base_s=0.01, cap_s=0.05)


def _requests(n: int, stage: str = "generate") -> list[ChatRequest]:
    return [ChatRequest(model="fake", stage=stage, tag=f"p{i}", params={"temperature": 0.8},
                        messages=(Message(role="user", content=f"第{i}题：写一篇短文"),))
            for i in range(n)]


def _run(server: FakeServerHandle, ledger_path: Path, requests: list[ChatRequest],
         reuse_failed_since: datetime | None = None,
         **spec: Any) -> tuple[list[ChatResult], Gateway]:
    async def main() -> tuple[list[ChatResult], Gateway]:
        with Ledger(ledger_path) as ledger:
            gateway = Gateway(registry_of(fake_spec(**spec)), ledger,
                              base_urls={"fake": server.base_url}, backoff=FAST, seed=0)
            try:
                return await gateway.run(requests, reuse_failed_since=reuse_failed_since), \
                    gateway
            finally:
                await gateway.aclose()
    return asyncio.run(main())


def test_rerun_serves_successes_from_the_ledger(tmp_path: Path) -> None:
    with run_fake_server() as server:
        first, gw = _run(server, tmp_path / "ledger.duckdb", _requests(30))
        assert all(r.ok and not r.from_ledger for r in first)
        assert gw.last_stats is not None and gw.last_stats.sent == 30
        second, gw2 = _run(server, tmp_path / "ledger.duckdb", _requests(30))
        stats = server.stats()
    assert all(r.from_ledger for r in second)
    assert [r.text for r in second] == [r.text for r in first]
    assert gw2.last_stats is not None and gw2.last_stats.sent == 0
    assert stats.totals.received == 30
    assert {k: v for k, v in stats.completed_per_key.items() if v} == {"1": 30}


def test_only_failed_calls_are_resent(tmp_path: Path) -> None:
    # Deterministic 40% of first arrivals fail; retries are off so they stay failed.
    scenario = FakeScenario.model_validate(
        {"faults": [{"kind": "status", "status": 503, "rate": 0.4, "seed": 5}]})
    with run_fake_server(scenario) as server:
        first, _ = _run(server, tmp_path / "l.duckdb", _requests(40), max_retries=0)
        failed = [r for r in first if not r.ok]
        assert 5 < len(failed) < 30
        assert {r.status for r in failed} == {CallStatus.API_ERROR}
        before = server.stats().totals.received
        second, gw = _run(server, tmp_path / "l.duckdb", _requests(40), max_retries=5)
        stats = server.stats()
    assert all(r.ok for r in second)
    assert gw.last_stats is not None and gw.last_stats.sent == len(failed)
    assert stats.totals.received - before >= len(failed)
    assert max(int(k) for k, v in stats.completed_per_key.items() if v) == 1
    with duckdb.connect(str(tmp_path / "l.duckdb"), read_only=True) as con:
        rows = con.execute("select status, count(*) from llm_calls group by 1").fetchall()
    assert dict(rows) == {"ok": 40, "api_error": len(failed)}  # failures stay on record


def test_duplicate_requests_in_a_batch_are_sent_once(tmp_path: Path) -> None:
    with run_fake_server() as server:
        results, _ = _run(server, tmp_path / "l.duckdb", _requests(5) + _requests(5))
        assert server.stats().totals.received == 5
    assert [r.key for r in results[:5]] == [r.key for r in results[5:]]


def test_ledger_rows_carry_what_reproducibility_needs(tmp_path: Path) -> None:
    scenario = FakeScenario.model_validate({"models": {"gpt-x": {"returned_model": "gpt-x-0101"}}})
    with run_fake_server(scenario) as server:
        _run(server, tmp_path / "l.duckdb", _requests(3))
    with duckdb.connect(str(tmp_path / "l.duckdb"), read_only=True) as con:
        row = con.execute("select model, endpoint, model_id, returned_model, stage, tag, status, "
                          "request, attempts, input_tokens, cost_usd, code_version "
                          "from llm_calls order by tag limit 1").fetchone()
    assert row is not None
    model, endpoint, model_id, returned, stage, tag, status, request, attempts, tokens, cost, cv \
        = row
    assert (model, endpoint, model_id, returned) == ("fake", "http://fake.invalid/v1", "gpt-x",
                                                     "gpt-x-0101")
    assert (stage, tag, status, attempts) == ("generate", "p0", "ok", 1)
    assert '"temperature":0.8' in request and '"max_tokens":256' in request
    assert tokens > 0 and cost > 0 and cv


def test_missing_key_fails_before_anything_is_sent(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with run_fake_server() as server:
        with pytest.raises(ApiKeyMissingError, match="NO_SUCH_KEY_VAR"):
            _run(server, tmp_path / "l.duckdb", _requests(3), api_key_env="NO_SUCH_KEY_VAR")
        assert server.stats().totals.received == 0


def test_second_ledger_writer_gets_a_clear_error(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.duckdb"), pytest.raises(StoreBusyError, match="busy"):
        Ledger(tmp_path / "l.duckdb", lock_timeout_s=0.2).open()


def test_group_commit_batches_concurrent_completions(tmp_path: Path) -> None:
    scenario = FakeScenario.model_validate({"models": {"*": {"latency_ms": 20}}})
    with run_fake_server(scenario) as server:
        async def main() -> int:
            with Ledger(tmp_path / "l.duckdb") as ledger:
                gateway = Gateway(registry_of(fake_spec(max_concurrency=32)), ledger,
                                  base_urls={"fake": server.base_url}, backoff=FAST)
                await gateway.run(_requests(200))
                await gateway.aclose()
                return ledger.commits
        commits = asyncio.run(main())
    assert 1 <= commits < 200  # completions that arrive together share a commit


def test_the_last_call_in_flight_is_committed_without_waiting_out_the_linger(
        tmp_path: Path) -> None:
    """The group commit waits ``linger_s`` for company only while calls are in flight:
    a batch whose last call has returned ends at once, and so does each of a chain of
    batches whose next step needs the last one's results (an adaptive round, a re-ask).
    With a linger of 30 s, ten single-call batches would take five minutes otherwise."""
    with run_fake_server() as server:
        async def main() -> tuple[float, int]:
            with Ledger(tmp_path / "l.duckdb", linger_s=30) as ledger:
                gateway = Gateway(registry_of(fake_spec()), ledger,
                                  base_urls={"fake": server.base_url}, backoff=FAST)
                started = time.monotonic()
                for request in _requests(10):
                    [result] = await gateway.run([request])
                    assert result.ok and not result.from_ledger
                await gateway.aclose()
                return time.monotonic() - started, ledger.commits
        elapsed, commits = asyncio.run(main())
    assert commits == 10
    assert elapsed < 30, elapsed


def test_one_gateway_serves_several_batches_on_fresh_event_loops(tmp_path: Path) -> None:
    from essaybench.llm.gateway import run_async

    with run_fake_server() as server, Ledger(tmp_path / "l.duckdb") as ledger:
        gateway = Gateway(registry_of(fake_spec(rpm=6000)), ledger,
                          base_urls={"fake": server.base_url}, backoff=FAST)
        first = run_async(gateway.run(_requests(10)))
        second = run_async(gateway.run(_requests(20)))  # a new loop: new HTTP clients
        assert all(r.ok for r in first + second)
        assert [r.from_ledger for r in second] == [True] * 10 + [False] * 10
        assert server.stats().totals.received == 20


def test_concurrent_runs_on_one_gateway_share_its_clients(tmp_path: Path) -> None:
    scenario = FakeScenario.model_validate({"models": {"*": {"latency_ms": 20}}})
    with run_fake_server(scenario) as server, Ledger(tmp_path / "l.duckdb") as ledger:
        gateway = Gateway(registry_of(fake_spec(max_concurrency=4)), ledger,
                          base_urls={"fake": server.base_url}, backoff=FAST)

        async def main() -> list[list[ChatResult]]:
            reqs = _requests(40)
            return list(await asyncio.gather(*(gateway.run([r]) for r in reqs)))

        results = asyncio.run(main())
    assert all(batch[0].ok for batch in results)


def test_api_key_never_reaches_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-ledger-leak-check-0123456789"
    monkeypatch.setenv("LEAK_CHECK_KEY", secret)
    scenario = FakeScenario.model_validate(
        {"api_key_env": "LEAK_CHECK_KEY",
         "faults": [{"kind": "status", "status": 401, "every_nth": 3}]})
    with run_fake_server(scenario) as server:
        results, _ = _run(server, tmp_path / "l.duckdb", _requests(6),
                          api_key_env="LEAK_CHECK_KEY")
    assert {r.status for r in results} == {CallStatus.OK, CallStatus.API_ERROR}
    for path in tmp_path.iterdir():  # the database, its WAL and its lock file
        assert secret.encode() not in path.read_bytes(), path


def _follow(request: ChatRequest, result: ChatResult) -> list[ChatRequest]:
    """Two follow-ups per ok reply (one of them shared by every reply)."""
    if not result.ok:
        return []
    return [ChatRequest(model="fake", stage="judge", tag=request.tag,
                        messages=(Message(role="user", content=f"评一评：{result.text}"),)),
            ChatRequest(model="fake", stage="judge", tag="shared",
                        messages=(Message(role="user", content="同一个问题"),))]


def test_follow_ups_join_the_batch_and_land_in_the_ledger(tmp_path: Path) -> None:
    async def batch(server: FakeServerHandle) -> tuple[list[ChatResult], Gateway]:
        with Ledger(tmp_path / "l.duckdb") as ledger:
            gateway = Gateway(registry_of(fake_spec(max_concurrency=4)), ledger,
                              base_urls={"fake": server.base_url}, backoff=FAST)
            return await gateway.run(_requests(12), follow_up=_follow), gateway

    with run_fake_server() as server:
        results, gw = asyncio.run(batch(server))
        assert server.stats().totals.received == 12 + 12 + 1
        again, gw2 = asyncio.run(batch(server))
        assert server.stats().totals.received == 25  # a rerun finds the follow-ups stored
    assert len(results) == 12 and all(r.stage == "generate" for r in results)
    assert gw.last_stats is not None
    assert (gw.last_stats.sent, gw.last_stats.follow_ups, gw.last_stats.follow_ups_sent) \
        == (12, 13, 13)
    assert gw2.last_stats is not None
    assert (gw2.last_stats.sent, gw2.last_stats.follow_ups_from_ledger,
            gw2.last_stats.follow_ups_sent) == (0, 13, 0)
    assert [r.text for r in again] == [r.text for r in results]
    with duckdb.connect(str(tmp_path / "l.duckdb"), read_only=True) as con:
        rows = con.execute("select stage, count(*) from llm_calls group by 1").fetchall()
    assert dict(rows) == {"generate": 12, "judge": 13}


def test_follow_up_results_pass_to_the_next_batch_in_memory_by_the_ledger_rule(
        tmp_path: Path) -> None:
    """A later batch of the same gateway gets the follow-ups' results without a request
    and without the ledger (from_ledger False: this gateway sent them); a failure is
    handed over only to a batch that reuses failures since before it finished, and each
    result is handed over once."""
    # About 40% of first arrivals fail: writers retry, the judge (no retries) keeps some.
    scenario = FakeScenario.model_validate({"faults": [
        {"kind": "status", "status": 503, "first_attempts": 1, "rate": 0.4, "seed": 3}]})
    follow_ups: list[ChatRequest] = []

    def judge_each(request: ChatRequest, result: ChatResult) -> list[ChatRequest]:
        extra = _judge_each(request, result)
        follow_ups.extend(extra)
        return extra

    async def main(server: FakeServerHandle) -> tuple[list[ChatResult], ...]:
        with Ledger(tmp_path / "l.duckdb") as ledger:
            gateway = Gateway(registry_of(fake_spec(max_retries=5),
                                          fake_spec("judge", max_retries=0)), ledger,
                              base_urls={"fake": server.base_url, "judge": server.base_url},
                              backoff=FAST)
            started = datetime.now(UTC)
            await gateway.run(_requests(20), follow_up=judge_each)
            received = server.stats().totals.received
            # Same model, stage and tag as a held one, other content: its own call.
            changed = follow_ups[0].model_copy(update={"messages": (
                Message(role="user", content="另一篇"),)})
            (other,) = await gateway.run([changed])
            assert server.stats().totals.received == received + 1
            received += 1
            served = await gateway.run(follow_ups, reuse_failed_since=started)
            assert server.stats().totals.received == received  # nothing sent
            assert gateway.last_stats is not None
            assert gateway.last_stats.from_follow_ups == 20
            assert gateway.last_stats.from_ledger == 0
            assert other.key != served[0].key
            again = await gateway.run(follow_ups)  # handed over once: now the ledger's
            await gateway.aclose()
            return served, again

    with run_fake_server(scenario) as server:
        served, again = asyncio.run(main(server))
    failed = [r for r in served if not r.ok]
    assert 0 < len(failed) < 20 and not any(r.from_ledger for r in served)
    # Without reuse_failed_since the failures are retried; the successes come from the ledger.
    assert all(r.ok for r in again)
    assert sum(r.from_ledger for r in again) == 20 - len(failed)


def test_the_stored_request_is_what_the_key_hashes(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"score": {"type": "integer"}},
              "required": ["score"]}
    requests = [r.model_copy(update={"response_schema": schema}) for r in _requests(3)]
    with run_fake_server(FakeScenario.model_validate(
            {"models": {"*": {"structured": "schema"}}})) as server:
        results, _ = _run(server, tmp_path / "l.duckdb", requests)
    with duckdb.connect(str(tmp_path / "l.duckdb"), read_only=True) as con:
        rows = con.execute("select key, request from llm_calls").fetchall()
    assert sorted(k for k, _ in rows) == sorted(r.key for r in results)
    for key, stored in rows:
        assert hashlib.sha256(stored.encode()).hexdigest()[:32] == key
        request = json.loads(stored)
        assert request["schema"] == schema and request["model_id"] == "gpt-x"


def test_a_batch_without_requests_ends_with_a_follow_up(tmp_path: Path) -> None:
    with run_fake_server() as server:
        results, gw = _run(server, tmp_path / "l.duckdb", [])
    assert results == [] and gw.last_stats is not None and gw.last_stats.follow_ups == 0


def test_failures_settled_since_a_moment_are_served_not_resent(tmp_path: Path) -> None:
    # Every first arrival fails (no retries): the first run records 6 failures.
    scenario = FakeScenario.model_validate(
        {"faults": [{"kind": "status", "status": 503, "first_attempts": 1}]})
    ledger = tmp_path / "ledger.duckdb"
    with run_fake_server(scenario) as server:
        started = datetime.now(UTC)
        first, _ = _run(server, ledger, _requests(6), max_retries=0)
        assert {r.status for r in first} == {CallStatus.API_ERROR}
        # Same run (failures since `started` count as settled): nothing is sent again.
        same, gw = _run(server, ledger, _requests(6), reuse_failed_since=started, max_retries=0)
        assert server.stats().totals.received == 6
        assert all(r.from_ledger and r.status is CallStatus.API_ERROR for r in same)
        assert gw.last_stats is not None and gw.last_stats.sent == 0
        # Failures older than the moment do not count: a later run retries them.
        later, _ = _run(server, ledger, _requests(6), max_retries=0,
                        reuse_failed_since=datetime.now(UTC) + timedelta(seconds=1))
        assert server.stats().totals.received == 12 and all(r.ok for r in later)
        # Once a call succeeded, the success wins over any failure, whatever the moment.
        again, _ = _run(server, ledger, _requests(6), reuse_failed_since=started)
        assert all(r.ok and r.from_ledger for r in again)
        assert server.stats().totals.received == 12


class _Timed:
    """An in-process backend: every call takes ``delay_s``; records when calls start."""

    def __init__(self, spec: Any, delay_s: float, log: list[str]) -> None:
        self.spec, self.delay_s, self.log = spec, delay_s, log

    async def complete(self, request: ChatRequest, key: str | None = None,
                       idempotency: str | None = None) -> ChatResult:
        self.log.append(request.stage)
        await asyncio.sleep(self.delay_s)
        return ChatResult(key=key or "", model=request.model, status=CallStatus.OK,
                          text=f"答{request.tag}", stage=request.stage, tag=request.tag,
                          finished_at=datetime.now(UTC))

    async def aclose(self) -> None:
        return None


def _judge_each(request: ChatRequest, result: ChatResult) -> list[ChatRequest]:
    return [ChatRequest(model="judge", stage="judge", tag=request.tag,
                        messages=(Message(role="user", content=f"评一评：{result.text}"),))]


@pytest.mark.parametrize("ramp_s", [30.0, 0.01])
def test_primaries_ramp_up_so_follow_ups_start_early(tmp_path: Path, ramp_s: float,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """At the start RAMP_FIRST primaries go, then two more per result, so the first
    results come back fast and their follow-ups start early; RAMP_S ends the ramp."""
    import essaybench.llm.batching as batching

    monkeypatch.setattr(batching, "RAMP_FIRST", 3)
    monkeypatch.setattr(batching, "RAMP_S", ramp_s)
    log: list[str] = []
    writer, judge = fake_spec(max_concurrency=20), fake_spec("judge", max_concurrency=4)

    async def main() -> tuple[list[ChatResult], Gateway]:
        with Ledger(tmp_path / "l.duckdb") as ledger:
            gateway = Gateway(registry_of(writer, judge), ledger,
                              backends={"fake": _Timed(writer, 0.05, log),
                                        "judge": _Timed(judge, 0.05, log)})
            return await gateway.run(_requests(40), follow_up=_judge_each), gateway

    results, gw = asyncio.run(main())
    assert len(results) == 40 and all(r.ok for r in results)
    assert gw.last_stats is not None and gw.last_stats.follow_ups_sent == 40
    before_first_judge = log.index("judge")
    if ramp_s > 1:
        assert 3 <= before_first_judge <= 3 + 2 * 3
    else:  # the ramp ended at once: the writer's whole concurrency went out first
        assert before_first_judge >= 20


def test_the_ramp_does_not_wait_on_follow_ups_of_the_same_endpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Follow-ups queue behind the primaries of their endpoint; the ramp advances on
    primary results alone, so it never waits for them (no stall until RAMP_S)."""
    import essaybench.llm.batching as batching

    monkeypatch.setattr(batching, "RAMP_FIRST", 3)
    monkeypatch.setattr(batching, "RAMP_S", 30.0)
    spec = fake_spec(max_concurrency=20)
    log: list[str] = []

    async def main() -> list[ChatResult]:
        with Ledger(tmp_path / "l.duckdb") as ledger:
            gateway = Gateway(registry_of(spec), ledger,
                              backends={"fake": _Timed(spec, 0.05, log)})
            return await gateway.run(_requests(40), follow_up=_follow)

    started = time.monotonic()
    results = asyncio.run(main())
    assert len(results) == 40 and time.monotonic() - started < 10
    assert log.count("judge") == 41


def test_objects_alive_before_a_batch_are_frozen_during_it(tmp_path: Path) -> None:
    """gc.freeze for the batch (full collections skip what the process already held);
    the freeze is undone when the last concurrent batch ends."""
    import gc

    frozen: list[int] = []
    spec = fake_spec(max_concurrency=4)

    class Counting(_Timed):
        async def complete(self, request: ChatRequest, key: str | None = None,
                           idempotency: str | None = None) -> ChatResult:
            frozen.append(gc.get_freeze_count())
            return await super().complete(request, key)

    async def main() -> None:
        with Ledger(tmp_path / "l.duckdb") as ledger:
            gateway = Gateway(registry_of(spec), ledger,
                              backends={"fake": Counting(spec, 0.01, [])})
            await asyncio.gather(gateway.run(_requests(6)), gateway.run(_requests(9)))

    assert gc.get_freeze_count() == 0
    asyncio.run(main())
    assert len(frozen) == 15 and min(frozen) > 0
    assert gc.get_freeze_count() == 0
