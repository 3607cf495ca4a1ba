"""Replicas: one registry entry served by several equivalent servers (the embedded model
on two cores). Calls spread over the servers, a rubric goes back to the replica that last
read it, and the ledger keys do not depend on which replica answered."""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from pathlib import Path

import pytest

from essaybench.core.errors import UserError
from essaybench.llm.batching import Call, take_next
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.gateway import Gateway
from essaybench.llm.ledger import Ledger
from essaybench.llm.replicas import HOME_MIN_CHARS, ReplicaPool, affinity_of
from essaybench.llm.retry import Backoff
from essaybench.llm.session import REPLICAS_ENV, embedded_replica_count
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message
from tests.llm.conftest import fake_spec, registry_of

FAST = Backoff(base_s=0.01, cap_s=0.05)


def test_least_busy_first_then_the_warm_replica_then_the_longest_idle() -> None:
    pool = ReplicaPool(["http://a/v1/", "http://b/v1"])
    assert pool.urls == ["http://a/v1", "http://b/v1"]
    with pool.lease("rubric-1") as first:
        assert first == "http://a/v1"
        with pool.lease("rubric-1") as second:  # a is busy: b, even though a is warm
            assert second == "http://b/v1"
            assert pool.busy() == [1, 1]
        # b is free again (and last read rubric-1): a new rubric goes to the free one
        with pool.lease("rubric-2") as third:
            assert third == "http://b/v1"
    assert pool.busy() == [0, 0]
    # Both free: a last read rubric-1, b rubric-2; each rubric returns to its replica.
    with pool.lease("rubric-2") as url:
        assert url == "http://b/v1"
    with pool.lease("rubric-1") as url:
        assert url == "http://a/v1"
    # A rubric neither holds goes to the replica idle the longest: b (a served last).
    with pool.lease("rubric-3") as url:
        assert url == "http://b/v1"
    with pytest.raises(ValueError, match="at least one"):
        ReplicaPool([])


def test_a_long_first_message_keeps_its_home_replica_even_when_busy() -> None:
    """A rubric read by one replica is not read again by another: its calls queue at home.
    Short first messages (a writer's system prompt) still go to the least busy."""
    pool = ReplicaPool(["http://a/v1", "http://b/v1"])
    rubric = affinity_of((Message(role="system", content="细" * HOME_MIN_CHARS),))
    short = affinity_of((Message(role="system", content="请用中文写作。"),))
    assert rubric.startswith("home:") and not short.startswith("home:")
    with pool.lease(rubric) as first:
        assert first == "http://a/v1"
        with pool.lease(rubric) as again:  # a is busy, but a holds the rubric
            assert again == "http://a/v1"
            with pool.lease(short) as other:
                assert other == "http://b/v1"
            with pool.lease(short) as other:  # b is free again, a is busy twice
                assert other == "http://b/v1"
    other_rubric = affinity_of((Message(role="system", content="描" * HOME_MIN_CHARS),))
    with pool.lease(rubric), pool.lease(other_rubric) as url:  # a new rubric's home: b
        assert url == "http://b/v1"
    with pool.lease(other_rubric) as url:
        assert url == "http://b/v1"


def _call(i: int, system: str) -> Call:
    return Call(f"k{i}", None, ChatRequest(model="m", messages=(
        Message(role="system", content=system), Message(role="user", content=f"作文{i}"))))


def test_two_rubrics_get_two_homes_while_a_replica_is_busy_writing() -> None:
    """b writes an essay, a is free: the first rubric goes to a; the second must not join
    it (a and b then equally loaded), or every judge call queues at a once b is idle."""
    pool = ReplicaPool(["http://a/v1", "http://b/v1"])
    writer_1, writer_2 = (affinity_of((Message(role="system", content=c),)) for c in "甲乙")
    rubric_1, rubric_2 = (affinity_of((Message(role="system", content=c * HOME_MIN_CHARS),))
                          for c in "甲乙")
    with pool.lease(writer_1) as a, pool.lease(writer_2) as b:
        assert (a, b) == ("http://a/v1", "http://b/v1")
    with pool.lease(writer_2) as b:  # b writes again (it last read writer_2), a is free
        assert b == "http://b/v1"
        with pool.reserve(rubric_1), pool.reserve(rubric_2):
            assert pool.pick(rubric_1) == 0 and pool.pick(rubric_2) == 1
    # Later rubrics spread the same way: each replica holds two.
    rubric_3, rubric_4 = (affinity_of((Message(role="system", content=c * HOME_MIN_CHARS),))
                          for c in "丙丁")
    assert sorted([pool.pick(rubric_3), pool.pick(rubric_4)]) == [0, 1]


def test_a_worker_takes_the_first_call_that_would_not_wait_at_a_busy_home() -> None:
    """Two judge workers taking calls in queue order could both wait at one rubric's home
    while the other replica idles; each takes the first call whose replica is free."""
    pool = ReplicaPool(["http://a/v1", "http://b/v1"])
    arg, nar = "议" * HOME_MIN_CHARS, "记" * HOME_MIN_CHARS
    queue = deque((_call(i, s), i) for i, s in enumerate([arg, arg, arg, nar, nar]))
    _, first, arg_aff = take_next(queue, pool)
    assert first == 0
    with pool.reserve(arg_aff):  # taken: its rubric's home (a) counts as busy from now
        assert pool.would_wait(arg_aff) and pool.pick(arg_aff) == 0
        _, second, nar_aff = take_next(queue, pool)
        assert second == 3  # not the next argumentative call: it would wait at a
        with pool.reserve(nar_aff):
            assert pool.pick(nar_aff) == 1  # a new rubric's home: the replica not taken
            _, third, _ = take_next(queue, pool)  # both homes taken: queue order
            assert third == 1
    assert not pool.would_wait(arg_aff)
    _, fourth, _ = take_next(queue, pool)
    assert fourth == 2
    short = affinity_of((Message(role="system", content="请用中文写作。"),))
    with pool.reserve(short):  # a call without a home reserves nothing
        assert not pool.would_wait(short) and pool.busy() == [0, 0]
    # one replica, or none: queue order
    for single in (None, ReplicaPool(["http://a/v1"])):
        queue = deque((_call(i, s), i) for i, s in enumerate([arg, nar]))
        assert take_next(queue, single)[1:] == (0, "")


def test_affinity_is_the_first_message() -> None:
    rubric = Message(role="system", content="细则")
    assert affinity_of((rubric, Message(role="user", content="作文一"))) == affinity_of(
        (rubric, Message(role="user", content="作文二")))
    assert affinity_of((Message(role="user", content="作文一"),)) != affinity_of((rubric,))
    assert affinity_of(()) == ""


def _requests() -> list[ChatRequest]:
    rubrics = ("议论文细则", "记叙文细则")
    return [ChatRequest(model="fake", stage="judge", tag=f"e{i}", params={"temperature": 0.2},
                        messages=(Message(role="system", content=rubrics[i % 2]),
                                  Message(role="user", content=f"第{i}篇作文")))
            for i in range(8)]


def _run(pool_or_url: ReplicaPool | str, ledger: Path) -> list[ChatResult]:
    async def main() -> list[ChatResult]:
        with Ledger(ledger) as led:
            gateway = Gateway(registry_of(fake_spec(max_concurrency=2)), led,
                              base_urls={"fake": pool_or_url}, backoff=FAST, seed=0)
            try:
                return await gateway.run(_requests())
            finally:
                await gateway.aclose()
    return asyncio.run(main())


def test_calls_spread_over_real_replicas_and_keys_ignore_which_answered(
        tmp_path: Path) -> None:
    slow = FakeScenario.model_validate({"models": {"*": {"latency_ms": 150}}})
    with run_fake_server(slow) as a, run_fake_server(slow) as b:
        results = _run(ReplicaPool([a.base_url, b.base_url]), tmp_path / "ledger.duckdb")
        served = [a.stats().totals.received, b.stats().totals.received]
    assert all(r.ok and not r.from_ledger for r in results)
    # Two calls in flight at a time, one per replica: the work is shared.
    assert sorted(served) == [4, 4]
    # A rerun through a single server finds every call in the ledger: the key is the
    # entry's configured URL, not the replica's.
    with run_fake_server() as c:
        again = _run(c.base_url, tmp_path / "ledger.duckdb")
        assert c.stats().totals.received == 0
    assert all(r.from_ledger for r in again)
    assert [r.text for r in again] == [r.text for r in results]


def test_replica_count_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REPLICAS_ENV, "3")
    assert embedded_replica_count() == 3
    monkeypatch.setenv(REPLICAS_ENV, "zero")
    with pytest.raises(UserError, match=f"{REPLICAS_ENV} must be a whole number"):
        embedded_replica_count()
    monkeypatch.setenv(REPLICAS_ENV, "0")
    with pytest.raises(UserError, match=f"{REPLICAS_ENV} must be a whole number"):
        embedded_replica_count()
    monkeypatch.delenv(REPLICAS_ENV)
    # The default: one per CPU, at most two (each replica runs one thread).
    for cpus, replicas in ((None, 1), (1, 1), (2, 2), (3, 2), (64, 2)):
        monkeypatch.setattr("essaybench.llm.session.os.cpu_count", lambda n=cpus: n)
        assert embedded_replica_count() == replicas, cpus


def test_a_replica_that_refuses_connections_is_set_aside_and_its_homes_move() -> None:
    pool = ReplicaPool(["http://a/v1", "http://b/v1"])
    home = "home:" + "r" * 16
    assert pool.pick(home) == 0  # rubric r lives on a
    pool.mark_down("http://a/v1/")
    assert pool.down() == ["http://a/v1"]
    assert pool.pick(home) == 1 and pool.pick("other") == 1
    pool.mark_down("http://b/v1")  # every replica down: try them all, and fail saying why
    assert {pool.pick("x"), pool.pick("y")} <= {0, 1}


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens: connections are refused


def test_calls_homed_on_a_dead_replica_are_answered_by_the_live_one(tmp_path: Path) -> None:
    """A server of the pool died: the calls whose rubric lived there are retried on the
    other replica instead of failing at the dead home after every retry."""
    rubric = "评分细则：" + "论点明确。" * (HOME_MIN_CHARS // 5)
    requests = [ChatRequest(model="fake", stage="judge", tag=f"e{i}",
                            messages=(Message(role="system", content=rubric),
                                      Message(role="user", content=f"第{i}篇作文")))
                for i in range(6)]
    dead = _closed_port_url()

    async def main(live: str) -> tuple[list[ChatResult], ReplicaPool]:
        pool = ReplicaPool([dead, live])  # the rubric's first call goes to the dead one
        with Ledger(tmp_path / "ledger.duckdb") as led:
            gateway = Gateway(registry_of(fake_spec(max_concurrency=2)), led,
                              base_urls={"fake": pool}, backoff=FAST, seed=0)
            return await gateway.run(requests), pool

    with run_fake_server() as live:
        results, pool = asyncio.run(main(live.base_url))
        assert live.stats().totals.completed == 6
    assert [r.status for r in results] == [CallStatus.OK] * 6
    assert pool.down() == [dead]
