"""The ledger records the run that paid for each call, and serves a batch only calls its
reuse scope allows: a new run pays again, a rerun of the run (or a run told to reuse it)
does not. Counted at the fake server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.llm.gateway import Gateway
from essaybench.llm.ledger import Ledger
from essaybench.llm.retry import Backoff
from essaybench.llm.scope import ANY_RUN, ReuseScope
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message
from tests.llm.conftest import fake_spec, registry_of

FAST = Backoff(base_s=0.01, cap_s=0.05)
FollowUp = Callable[[ChatRequest, ChatResult], Sequence[ChatRequest]]


def _requests(n: int) -> list[ChatRequest]:
    return [ChatRequest(model="fake", stage="generate", tag=f"p{i}",
                        messages=(Message(role="user", content=f"第{i}题：写一篇短文"),))
            for i in range(n)]


def _judge_each(request: ChatRequest, result: ChatResult) -> list[ChatRequest]:
    return [ChatRequest(model="judge", stage="judge", tag=request.tag,
                        messages=(Message(role="user", content=f"评一评：{result.text}"),))]


def _gateway(ledger: Ledger, server: FakeServerHandle, scope: ReuseScope,
             **spec: Any) -> Gateway:
    return Gateway(registry_of(fake_spec(**spec), fake_spec("judge", **spec)), ledger,
                   base_urls={"fake": server.base_url, "judge": server.base_url},
                   backoff=FAST, seed=0, scope=scope)


def _batch(ledger_path: Path, server: FakeServerHandle, scope: ReuseScope,
           requests: list[ChatRequest], follow_up: FollowUp | None = None,
           reuse_failed_since: datetime | None = None, **spec: Any) -> list[ChatResult]:
    async def main() -> list[ChatResult]:
        with Ledger(ledger_path) as ledger:
            return await _gateway(ledger, server, scope, **spec).run(
                requests, follow_up=follow_up, reuse_failed_since=reuse_failed_since)
    return asyncio.run(main())


def _paid_by(ledger_path: Path) -> dict[str | None, int]:
    with duckdb.connect(str(ledger_path), read_only=True) as con:
        rows = con.execute("select run_id, count(*) from llm_calls group by run_id").fetchall()
    return dict(rows)


def test_a_new_run_pays_again_its_rerun_and_a_lender_do_not(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.duckdb"
    with run_fake_server() as server:
        _batch(ledger, server, ReuseScope.of_run("r1"), _requests(10))
        assert server.stats().totals.received == 10
        second = _batch(ledger, server, ReuseScope.of_run("r2"), _requests(10))
        assert server.stats().totals.received == 20  # a new run: every call sent again
        assert not any(r.from_ledger for r in second)
        rerun = _batch(ledger, server, ReuseScope.of_run("r2b", ["r2"]), _requests(10))
        borrowed = _batch(ledger, server, ReuseScope.of_run("r3", ["r1"]), _requests(10))
        assert server.stats().totals.received == 20  # both served from the ledger
        stats = server.stats()
    assert all(r.from_ledger for r in rerun + borrowed)
    assert {k: n for k, n in stats.received_per_key.items() if n} == {"2": 10}
    assert _paid_by(ledger) == {"r1": 10, "r2": 10}


def test_follow_ups_are_looked_up_and_handed_over_within_the_scope(tmp_path: Path) -> None:
    """FollowUps' ledger look-ups (BatchHost.lookup_ok) and the gateway's held results
    both honour the scope: run r2 pays for the follow-ups r1 paid for; a held result
    reaches a later batch only in a scope that allows the run that paid for it."""
    ledger_path = tmp_path / "ledger.duckdb"
    follow_ups: list[ChatRequest] = []

    def judge_each(request: ChatRequest, result: ChatResult) -> list[ChatRequest]:
        extra = _judge_each(request, result)
        follow_ups.extend(extra)
        return extra

    async def main(server: FakeServerHandle) -> tuple[int, ...]:
        with Ledger(ledger_path) as ledger:
            one = _gateway(ledger, server, ReuseScope.of_run("r1"))
            await one.run(_requests(6), follow_up=judge_each)
            after_r1 = server.stats().totals.received
            # Another gateway (nothing held), run r2: primaries and follow-ups sent again.
            two = _gateway(ledger, server, ReuseScope.of_run("r2"))
            await two.run(_requests(6), follow_up=_judge_each)
            after_r2 = server.stats().totals.received
            # r1's gateway now serves run r3 (not r1's lineage): r1's held results are not
            # handed over, nor served from the ledger: sent and paid by r3.
            one.scope = ReuseScope.of_run("r3")
            await one.run(follow_ups)
            after_r3 = server.stats().totals.received
            # A rerun of r1 on that gateway: the results r1 paid for and still held
            # (r3's batch left them) come from memory, not the ledger.
            one.scope = ReuseScope.of_run("r1b", ["r1"])
            served = await one.run(follow_ups)
            assert one.last_stats is not None
            return (after_r1, after_r2, after_r3, server.stats().totals.received,
                    one.last_stats.from_follow_ups, sum(r.from_ledger for r in served))

    with run_fake_server(FakeScenario.model_validate(
            {"models": {"*": {"reply": "template", "template": "答：{prompt}"}}})) as server:
        after_r1, after_r2, after_r3, end, held, from_ledger = asyncio.run(main(server))
    assert (after_r1, after_r2, after_r3, end) == (12, 24, 30, 30)
    assert (held, from_ledger) == (6, 0)
    assert _paid_by(ledger_path) == {"r1": 12, "r2": 12, "r3": 6}


def test_a_failure_is_settled_for_its_own_run_only(tmp_path: Path) -> None:
    """Within a run a failed call is attempted once (reuse_failed_since); another run
    attempts it again even when it asks for failures since before it was made."""
    scenario = FakeScenario.model_validate(
        {"faults": [{"kind": "status", "status": 503, "first_attempts": 1}]})
    ledger = tmp_path / "ledger.duckdb"
    with run_fake_server(scenario) as server:
        started = datetime.now(UTC)
        first = _batch(ledger, server, ReuseScope.of_run("r1"), _requests(4), max_retries=0)
        assert {r.status for r in first} == {CallStatus.API_ERROR}
        same = _batch(ledger, server, ReuseScope.of_run("r1"), _requests(4),
                      reuse_failed_since=started, max_retries=0)
        assert server.stats().totals.received == 4  # r1's failures stand for r1
        assert all(r.from_ledger and not r.ok for r in same)
        other = _batch(ledger, server, ReuseScope.of_run("r2"), _requests(4),
                       reuse_failed_since=started, max_retries=0)
        assert server.stats().totals.received == 8 and all(r.ok for r in other)



def test_a_failed_follow_up_is_settled_for_its_run_too(tmp_path: Path) -> None:
    """A follow-up that failed is attempted once within the run as well: asked again (its
    primary served from the ledger: a later round, an entry after waiting for batches),
    it is served under the same reuse_failed_since as a primary, not re-sent."""
    scenario = FakeScenario.model_validate(
        {"faults": [{"kind": "status", "status": 400, "first_attempts": 1,
                     "models": ["judge-id"]}]})
    path = tmp_path / "ledger.duckdb"

    def judged(server: FakeServerHandle, run_id: str, since: datetime) -> int:
        async def main() -> None:
            with Ledger(path) as ledger:
                registry = registry_of(fake_spec(max_retries=0),
                                       fake_spec("judge", model_id="judge-id", max_retries=0))
                await Gateway(registry, ledger, base_urls=dict.fromkeys(
                    ("fake", "judge"), server.base_url), backoff=FAST, seed=0,
                    scope=ReuseScope.of_run(run_id)).run(
                    _requests(4), follow_up=_judge_each, reuse_failed_since=since)
        asyncio.run(main())
        return server.stats().per_model["judge-id"].received

    with run_fake_server(scenario) as server:
        started = datetime.now(UTC)
        assert judged(server, "r1", started) == 4  # each judge call failed
        assert judged(server, "r1", started) == 4  # served, not re-sent
        # another run (the same window) attempts them again
        assert judged(server, "r2", started) == 8
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.execute("select run_id, status, count(*) from llm_calls where model = "
                           "'judge' group by all order by all").fetchall()
    assert rows == [("r1", "api_error", 4), ("r2", "ok", 4)]


# The llm_calls table as ledgers created before calls carried their run had it.
OLD_SCHEMA = """
CREATE TABLE llm_calls (
    key VARCHAR NOT NULL, model VARCHAR NOT NULL, endpoint VARCHAR NOT NULL,
    model_id VARCHAR NOT NULL, returned_model VARCHAR, stage VARCHAR, tag VARCHAR,
    status VARCHAR NOT NULL, error_kind VARCHAR, error VARCHAR,
    request JSON USING COMPRESSION zstd NOT NULL, response_text VARCHAR USING COMPRESSION zstd,
    parsed JSON USING COMPRESSION zstd, finish_reason VARCHAR, input_tokens BIGINT,
    output_tokens BIGINT, cost_usd DOUBLE, latency_s DOUBLE, attempts INTEGER NOT NULL,
    started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ NOT NULL, code_version VARCHAR NOT NULL
);
CREATE INDEX llm_calls_key ON llm_calls (key);
INSERT INTO llm_calls (key, model, endpoint, model_id, status, request, response_text,
                       attempts, finished_at, code_version)
VALUES ('old-key', 'fake', 'http://x/v1', 'gpt-x', 'ok', '{}', '旧答', 1, now(), 'old');
"""


def test_an_old_ledger_gains_run_ids_in_place_and_its_calls_serve_only_who_asks(
        tmp_path: Path) -> None:
    path = tmp_path / "ledger.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(OLD_SCHEMA)
    with Ledger(path) as ledger:
        assert ledger.lookup_ok(["old-key"], scope=ReuseScope.of_run("r1")) == {}
        asked = ledger.lookup_ok(["old-key"], scope=ReuseScope.of_run("r1", (), True))
        anyone = ledger.lookup_ok(["old-key"], scope=ANY_RUN)
        columns = [r["column_name"] for r in ledger.query(
            "select column_name from duckdb_columns() where table_name = 'llm_calls'")]
    assert asked["old-key"].text == anyone["old-key"].text == "旧答"
    assert {"run_id", "retries", "reasks"} <= set(columns)
    # what the ledger did not record is unknown, not zero
    assert (anyone["old-key"].retries, anyone["old-key"].reasks) == (None, None)
    with Ledger(path) as ledger:  # opening again changes nothing
        rows = ledger.query("select key, run_id from llm_calls")
    assert rows == [{"key": "old-key", "run_id": None}]
