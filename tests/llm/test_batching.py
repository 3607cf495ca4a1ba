"""The batch machinery (Pools, FollowUps) driven as ``Gateway._run`` drives it, against an
in-memory host: per-model concurrency, every call exactly once, follow-ups de-duplicated,
looked up and committed, the ramp-up, and the bound on backpressure."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import pytest

from essaybench.llm import batching
from essaybench.llm.batching import Call, FollowUp, FollowUps, Pools
from essaybench.llm.client import canonical_request
from essaybench.llm.progress import ProgressBoard
from essaybench.llm.registry import ModelSpec
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message, key_of
from tests.llm.conftest import fake_spec

T = TypeVar("T")
BOUND_S = 3.0  # every batch is cut off after this: a scheduling bug fails, never hangs


def _spec(name: str, max_concurrency: int) -> ModelSpec:
    # Its own model id: equal messages to two models must not share a key.
    return fake_spec(name, model_id=f"id-{name}", max_concurrency=max_concurrency)


def _request(model: str, tag: str, stage: str = "generate") -> ChatRequest:
    return ChatRequest(model=model, stage=stage, tag=tag,
                       messages=(Message(role="user", content=f"写一篇短文：{tag}"),))


class FakeBackend:
    """Answers after a short sleep (once the host's gate for the model is open), keeping
    count of the calls in flight."""

    def __init__(self, host: FakeHost, spec: ModelSpec) -> None:
        self.host = host
        self.spec = spec

    async def complete(self, request: ChatRequest, key: str | None = None,
                       idempotency: str | None = None) -> ChatResult:
        assert key is not None  # the pools pass the key they computed
        host, model = self.host, request.model
        host.sent[key] += 1
        host.in_flight[model] += 1
        host.peak[model] = max(host.peak[model], host.in_flight[model])
        host.log.append(("start", model, time.perf_counter()))
        try:
            gate = host.gates.get(model)
            if gate is not None:
                await gate.wait()
            await asyncio.sleep(host.delay_s.get(model, 0.005))
        finally:
            host.in_flight[model] -= 1
        host.finished[model] += 1
        return ChatResult(key=key, model=model, status=CallStatus.OK, text=f"答：{request.tag}",
                          stage=request.stage, tag=request.tag)

    async def aclose(self) -> None:
        pass


class FakeHost:
    """A ``BatchHost`` over a dict ledger; keys as the gateway computes them."""

    def __init__(self, *specs: ModelSpec, delay_s: dict[str, float] | None = None) -> None:
        self.specs = {s.name: s for s in specs}
        self.delay_s = dict(delay_s or {})
        self.gates: dict[str, asyncio.Event] = {}  # a model's calls wait for its gate
        self.backends = {name: FakeBackend(self, s) for name, s in self.specs.items()}
        self.ledger: dict[str, ChatResult] = {}
        self.held: Counter[str] = Counter()
        self.sent: Counter[str] = Counter()  # by key
        self.in_flight: Counter[str] = Counter()  # by model
        self.peak: Counter[str] = Counter()
        self.finished: Counter[str] = Counter()
        self.log: list[tuple[str, str, float]] = []  # (event, model or key, time)
        self.lookups: list[list[str]] = []
        self.lookup_threads: set[int] = set()

    def spec(self, model: str) -> ModelSpec:
        return self.specs[model]

    def backend(self, model: str) -> FakeBackend:
        return self.backends[model]

    def prepare(self, request: ChatRequest) -> Call:
        canonical = canonical_request(self.spec(request.model), request)
        return Call(key_of(canonical), canonical, request)

    def redact(self, result: ChatResult) -> ChatResult:
        return result  # redaction is the gateway's (tests/llm/test_redaction.py)

    def may_send(self) -> None:
        pass  # fencing is the part ledger's (tests/stages/test_shard.py)

    def flush_soon(self) -> None:
        self.log.append(("flush_soon", str(sum(self.in_flight.values())), time.perf_counter()))

    def idempotency_of(self, call: Call) -> str | None:
        return None  # the header is the gateway's (tests/llm/test_idempotency.py)

    def store(self, request: ChatRequest) -> str:
        """Put a successful result of ``request`` in the ledger; its key."""
        key = self.prepare(request).key
        self.ledger[key] = ChatResult(key=key, model=request.model, status=CallStatus.OK,
                                      text="stored", from_ledger=True, tag=request.tag)
        return key

    def lookup_ok(self, keys: Sequence[str],
                  failed_since: datetime | None = None) -> dict[str, ChatResult]:
        self.lookups.append(list(keys))
        self.lookup_threads.add(threading.get_ident())
        return {k: self.ledger[k] for k in keys if k in self.ledger and self.ledger[k].ok}

    async def record(self, call: Call, result: ChatResult) -> None:
        self.log.append(("queued", call.key, time.perf_counter()))  # as the ledger's row
        await asyncio.sleep(0)  # a commit is a wait
        assert call.canonical is not None
        self.ledger[call.key] = result
        self.log.append(("record", call.key, time.perf_counter()))

    def hold(self, call: Call, result: ChatResult) -> None:
        assert call.key in self.ledger, "held before it was recorded"
        self.held[call.key] += 1
        self.log.append(("hold", call.key, time.perf_counter()))

    def batched(self, model: str) -> bool:
        return False  # every call direct (batch mode: tests/llm/batch/test_route.py)


@dataclass
class Batch:
    results: dict[str, ChatResult]
    finished: Counter[str]  # primary key -> times through on_done
    pools: Pools
    follow: FollowUps


async def drive(host: FakeHost, requests: Sequence[ChatRequest],
                follow_up: FollowUp | None = None) -> Batch:
    """What ``Gateway._run`` does with Pools and FollowUps (the ledger read directly)."""
    calls = [host.prepare(r) for r in requests]
    keys = [c.key for c in calls]
    stored = {k: host.ledger[k] for k in dict.fromkeys(keys) if k in host.ledger}
    first: dict[str, Call] = {}
    for call in calls:
        if call.key not in stored:
            first.setdefault(call.key, call)
    results = dict(stored)
    finished: Counter[str] = Counter()
    follow = FollowUps(host, follow_up, seen=set(keys))

    async def finish(call: Call, result: ChatResult) -> None:
        await host.record(call, result)
        results[call.key] = result
        finished[call.key] += 1
        follow.after(call.request, result)

    async with asyncio.TaskGroup() as group:
        pools = Pools(host, group, ProgressBoard())
        follow.start(pools)
        for call in first.values():
            pools.submit(call, finish)
        for call in calls:
            if call.key in stored:
                follow.after(call.request, stored[call.key])
        follow.close_when_idle()
    return Batch(results, finished, pools, follow)


def bounded(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, BOUND_S))


def test_each_model_fills_its_own_pool_and_no_more() -> None:
    host = FakeHost(_spec("a", 2), _spec("b", 5), delay_s={"a": 0.01, "b": 0.01})
    requests = [_request(m, f"{m}{i}") for i in range(16) for m in ("a", "b")]
    batch = bounded(drive(host, requests))
    assert host.peak == {"a": 2, "b": 5}
    assert batch.pools.workers == {"a": 0, "b": 0}
    assert len(batch.results) == 32


def test_every_call_completes_once_and_the_pools_drain() -> None:
    host = FakeHost(_spec("a", 3), _spec("b", 2))
    done: Counter[str] = Counter()

    async def main() -> tuple[Pools, list[Any]]:
        drained: list[Any] = []
        async with asyncio.TaskGroup() as group:
            pools = Pools(host, group, ProgressBoard())

            async def on_done(call: Call, result: ChatResult) -> None:
                await asyncio.sleep(0)
                done[call.key] += 1
                if call.request.stage == "generate":  # added while the batch runs
                    pools.submit(host.prepare(_request("b", call.request.tag, "judge")),
                                 on_done)

            for i in range(10):
                pools.submit(host.prepare(_request("a", f"x{i}")), on_done)
            await pools.wake.wait()
            drained.append((pools.outstanding, dict(pools.workers), len(done)))
            pools.wake.clear()
            # Drained pools take requests again: workers are spawned anew.
            for i in range(5):
                pools.submit(host.prepare(_request("a", f"y{i}", "late")), on_done)
            await pools.wake.wait()
        return pools, drained

    pools, drained = bounded(main())
    assert drained == [(0, {"a": 0, "b": 0}, 20)]
    assert len(done) == 25 and set(done.values()) == {1}
    assert host.sent == done
    assert pools.outstanding == 0 and pools.wake.is_set()
    assert pools.workers == {"a": 0, "b": 0}


def test_the_commit_is_hurried_only_when_no_call_is_in_flight() -> None:
    """Pools tell the host to commit at once (``flush_soon``) only when the call that
    returned was the last one in flight with nothing queued, after that call's row was
    handed to the host: never while another call could still join the commit."""
    host = FakeHost(_spec("a", 3), _spec("b", 2), delay_s={"a": 0.01, "b": 0.02})
    requests = [_request(m, f"{m}{i}") for i in range(7) for m in ("a", "b")]
    bounded(drive(host, requests))
    hurried = [i for i, (event, _, _) in enumerate(host.log) if event == "flush_soon"]
    assert hurried, host.log
    assert all(host.log[i][1] == "0" for i in hurried)  # no call in flight
    # the last hurry comes after the last call's row was queued (none waits for company)
    assert hurried[-1] > max(i for i, e in enumerate(host.log) if e[0] == "queued")
    assert len(hurried) < len(requests)  # not after every call: the others had company


def test_follow_ups_are_deduplicated_looked_up_and_committed() -> None:
    host = FakeHost(_spec("w", 3), _spec("j", 2))
    primaries = [_request("w", f"p{i}") for i in range(6)]
    stored_primary = _request("w", "p-stored")
    host.store(stored_primary)
    in_ledger = host.store(_request("j", "in-ledger", "judge"))
    asked: Counter[str] = Counter()

    def follow_up(request: ChatRequest, result: ChatResult) -> list[ChatRequest]:
        asked[request.tag] += 1
        own = _request("j", f"judge-{request.tag}", "judge")
        return [_request("j", "common", "judge"), own, own,  # the same twice, and shared
                _request("j", "in-ledger", "judge"),  # stored: looked up, not sent
                primaries[0]]  # a request of this batch: in ``seen``, not sent again

    batch = bounded(drive(host, [*primaries, stored_primary], follow_up))

    judge_tags = ["common", *(f"judge-{r.tag}" for r in (*primaries, stored_primary))]
    to_send = {host.prepare(_request("j", t, "judge")).key for t in judge_tags}
    follow = batch.follow
    assert asked == {r.tag: 1 for r in (*primaries, stored_primary)}
    assert (follow.unique, follow.from_ledger, follow.sent) == (9, 1, 8)
    # Each call sent once: the primaries (not the stored one) and the follow-ups to send.
    assert host.sent == Counter({host.prepare(r).key: 1 for r in primaries}
                                | {k: 1 for k in to_send})
    assert in_ledger not in host.sent
    # Every sent follow-up recorded, then held; no primary held.
    assert host.held == Counter({k: 1 for k in to_send})
    for key in to_send:
        order = [event for event, k, _ in host.log if k == key]
        assert order == ["queued", "record", "hold"]
    # Looked up in bunches off the event loop, each follow-up once.
    looked_up = [k for bunch in host.lookups for k in bunch]
    assert sorted(looked_up) == sorted(to_send | {in_ledger})
    assert threading.get_ident() not in host.lookup_threads
    assert host.peak["j"] <= 2
    assert batch.finished == Counter({host.prepare(r).key: 1 for r in primaries})
    assert batch.pools.outstanding == 0 and follow.backlog() == 0


def test_the_ramp_admits_the_first_few_then_more_per_result(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batching, "RAMP_FIRST", 3)
    monkeypatch.setattr(batching, "RAMP_PER_RESULT", 2)
    monkeypatch.setattr(batching, "RAMP_S", 60.0)  # longer than the batch: ramping throughout
    host = FakeHost(_spec("w", 8), _spec("j", 4), delay_s={"w": 0.01})

    def follow_up(request: ChatRequest, result: ChatResult) -> list[ChatRequest]:
        host.log.append(("result", request.model, time.perf_counter()))
        return [_request("j", request.tag, "judge")]

    bounded(drive(host, [_request("w", f"p{i}") for i in range(24)], follow_up))

    starts = results = 0
    for event, model, _ in host.log:
        if event == "result":
            results += 1
        elif event == "start" and model == "w":
            starts += 1
            assert starts <= 3 + 2 * results, f"primary {starts} started after {results} results"
    assert (starts, results) == (24, 24)
    assert host.peak["w"] == 8  # the ramp opened up to the endpoint's concurrency


def test_the_ramp_ends_after_ramp_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batching, "RAMP_FIRST", 2)
    monkeypatch.setattr(batching, "RAMP_PER_RESULT", 1)
    monkeypatch.setattr(batching, "RAMP_S", 0.05)
    host = FakeHost(_spec("w", 6), _spec("j", 1), delay_s={"w": 0.3})

    def follow_up(request: ChatRequest, result: ChatResult) -> list[ChatRequest]:
        host.log.append(("result", request.model, time.perf_counter()))
        return []

    t0 = time.perf_counter()
    bounded(drive(host, [_request("w", f"p{i}") for i in range(6)], follow_up))

    starts = [t - t0 for event, _, t in host.log if event == "start"]
    first_result = min(t - t0 for event, _, t in host.log if event == "result")
    assert len(starts) == 6
    # RAMP_FIRST at once; the rest when RAMP_S has passed, though no result came yet.
    assert max(starts[:2]) < min(starts[2:])
    assert min(starts[2:]) >= 0.045 and max(starts[2:]) < first_result


def test_a_stuck_follow_up_endpoint_slows_primaries_never_stops_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    hold_max = 0.05
    monkeypatch.setattr(batching, "HOLD_BACK_MAX_S", hold_max)
    holds: list[float] = []
    hold_back = FollowUps.hold_back

    async def timed(self: FollowUps) -> None:
        started = time.perf_counter()
        await hold_back(self)
        holds.append(time.perf_counter() - started)

    monkeypatch.setattr(FollowUps, "hold_back", timed)
    host = FakeHost(_spec("w", 2), _spec("j", 1))
    primaries = [_request("w", f"p{i}") for i in range(12)]

    def follow_up(request: ChatRequest, result: ChatResult) -> list[ChatRequest]:
        return [_request("j", f"{request.tag}-{n}", "judge") for n in range(3)]

    async def main() -> tuple[Batch, int]:
        gate = host.gates["j"] = asyncio.Event()
        judged_before_release = -1

        async def release_once_primaries_are_done() -> None:
            nonlocal judged_before_release
            while host.finished["w"] < len(primaries):
                await asyncio.sleep(0.005)
            judged_before_release = host.finished["j"]
            gate.set()

        async with asyncio.TaskGroup() as group:
            group.create_task(release_once_primaries_are_done())
            batch = await drive(host, primaries, follow_up)
        return batch, judged_before_release

    batch, judged_before_release = bounded(main())
    assert judged_before_release == 0  # every primary went through a stuck judge
    assert len(holds) == len(primaries)
    assert max(holds) < hold_max + 0.1
    # Backpressure did hold them: the backlog (3 per essay) is over ``room`` (2) from the
    # first result on, and the one judge call that starts lets one primary through; only
    # the first 2 rounds of primaries (4), checked before any result, and that one pass.
    assert sum(h >= 0.9 * hold_max for h in holds) >= len(primaries) - 5
    assert batch.follow.sent == 36 and host.finished["j"] == 36
