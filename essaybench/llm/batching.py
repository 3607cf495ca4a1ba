"""How a gateway batch's calls are scheduled: a worker pool per endpoint, and follow-up
requests (e.g. the judge calls of each fresh essay) with a ramp-up at the start and
backpressure on the primaries while the follow-ups' endpoints are the bottleneck.
``Gateway.run`` (gateway.py) owns the batch; this module is its machinery, and knows
the gateway only through :class:`BatchHost`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar, runtime_checkable

from essaybench.llm.client import ChatBackend
from essaybench.llm.progress import Progress
from essaybench.llm.registry import ModelSpec
from essaybench.llm.replicas import ReplicaPool, affinity_of
from essaybench.llm.types import ChatRequest, ChatResult

# Requests a finished call asks for (e.g. the judge calls of a fresh essay).
FollowUp = Callable[[ChatRequest, ChatResult], Sequence[ChatRequest]]


@runtime_checkable
class SettledHook(Protocol):
    """A follow-up that is also told each of its own calls' results once committed (the
    judge prefetch reads them while the batch is still running). It must not raise."""

    def settled(self, request: ChatRequest, result: ChatResult) -> None: ...
HOLD_BACK_MAX_S = 5.0  # longest a primary call waits for follow-ups to catch up
# Start of a batch with follow-ups: primaries ramp up (see FollowUps), for at most RAMP_S.
RAMP_FIRST = 128
RAMP_PER_RESULT = 2
RAMP_S = 5.0
# Queued calls a worker of a replicated endpoint looks through for one that would not wait
# at a busy home replica (see ``take_next``); beyond them it takes the first.
REPLICA_LOOKAHEAD = 64


@dataclass(frozen=True, slots=True)
class Call:
    """A request on its way: its key and the canonical JSON the key hashes (which the
    ledger stores), computed once; None when the key came from an equal held request
    (see ``Gateway.prepare``), in which case it is computed if the call is recorded."""

    key: str
    canonical: str | None
    request: ChatRequest


OnDone = Callable[[Call, ChatResult], Coroutine[Any, Any, None]]


class BatchHandle(Protocol):
    """Calls submitted to providers' batch APIs."""

    async def wait(self) -> dict[str, ChatResult]:
        """Each call's result by key, once every batch ended (or the port's own way of
        not waiting: ``llm.batch.route.BatchesPending``)."""
        ...


class BatchPort(Protocol):
    """Sends the calls of entries with a batch API (``llm.batch.route.BatchRoute``)."""

    async def submit(self, calls: Sequence[Call]) -> BatchHandle:
        """Submit ``calls`` (none already in a batch of the run is submitted again)."""
        ...


class BatchHost(Protocol):
    """What the batch machinery asks of the gateway that owns the batch."""

    def spec(self, model: str) -> ModelSpec:
        """The registry entry of ``model`` (its ``max_concurrency`` sizes the pool)."""
        ...

    def backend(self, model: str) -> ChatBackend:
        """The backend that sends ``model``'s calls."""
        ...

    def prepare(self, request: ChatRequest) -> Call:
        """``request`` with its key: a follow-up on its way."""
        ...

    def redact(self, result: ChatResult) -> ChatResult:
        """A backend's result with no secret in it: what is recorded and handed on."""
        ...

    def idempotency_of(self, call: Call) -> str | None:
        """The token a provider may de-duplicate ``call`` by (None: send none)."""
        ...

    def flush_soon(self) -> None:
        """No call of the batch is in flight: commit what waits without lingering for
        more rows (``Ledger.flush_soon``)."""
        ...

    def may_send(self) -> None:
        """Raises when no call may be sent any more (a superseded shard attempt's gateway:
        ``llm.part_ledger``); checked before each send, so it must be cheap."""
        ...

    def lookup_ok(self, keys: Sequence[str],
                  failed_since: datetime | None = None) -> dict[str, ChatResult]:
        """The stored successful result of each key that has one, among the calls the
        host's reuse scope allows, and a failure finished at or after ``failed_since``
        (``Gateway.run``'s ``reuse_failed_since``) (blocking: runs in a thread)."""
        ...

    async def record(self, call: Call, result: ChatResult) -> None:
        """Make a finished call durable (before anyone sees its result)."""
        ...

    def hold(self, call: Call, result: ChatResult) -> None:
        """Keep a follow-up's result for the stage that will ask for it."""
        ...

    def batched(self, model: str) -> bool:
        """Whether ``model``'s calls go through a batch API (never as follow-ups)."""
        ...


_T = TypeVar("_T")


def take_next(queue: deque[tuple[Call, _T]],
              pool: ReplicaPool | None) -> tuple[Call, _T, str]:
    """The next call of an endpoint's queue and its replica affinity: the first queued,
    except that on several replicas a call that would wait at its busy home replica
    yields to the first of the next few that would not (see ``llm.replicas``)."""
    if pool is None or len(pool) < 2:
        call, extra = queue.popleft()
        return call, extra, ""
    for i, (call, extra) in enumerate(itertools.islice(queue, REPLICA_LOOKAHEAD)):
        affinity = affinity_of(call.request.messages)
        if not pool.would_wait(affinity):
            del queue[i]
            return call, extra, affinity
    call, extra = queue.popleft()
    return call, extra, affinity_of(call.request.messages)


class Pools:
    """A pool of workers per endpoint over its queue, instead of one task per request:
    far fewer tasks and semaphore waits at 10k calls. Requests may be added while the
    batch runs; workers are spawned up to the endpoint's concurrency."""

    def __init__(self, gateway: BatchHost, group: asyncio.TaskGroup,
                 progress: Progress) -> None:
        self.gateway = gateway
        self.group = group
        self.progress = progress
        self.queues: dict[str, deque[tuple[Call, OnDone]]] = {}
        self.workers: dict[str, int] = {}
        self.follow: FollowUps | None = None  # set when the batch has follow-ups
        self.outstanding = 0  # submitted, not yet through ``on_done``
        self.calling = 0  # calls sent and not yet returned, over every endpoint
        self.wake = asyncio.Event()  # set when outstanding reaches 0 (and by follow-ups)

    def submit(self, call: Call, on_done: OnDone) -> None:
        model = call.request.model
        queue = self.queues.setdefault(model, deque())
        queue.append((call, on_done))
        self.outstanding += 1
        self.progress.planned(call.request)
        if self.workers.get(model, 0) < self.gateway.spec(model).max_concurrency:
            self.workers[model] = self.workers.get(model, 0) + 1
            self.group.create_task(self._worker(model, queue))

    async def _worker(self, model: str, queue: deque[tuple[Call, OnDone]]) -> None:
        backend = self.gateway.backend(model)
        pool = getattr(backend, "pool", None)
        pool = pool if isinstance(pool, ReplicaPool) else None
        try:
            while queue:
                call, on_done, affinity = take_next(queue, pool)
                with pool.reserve(affinity) if pool is not None else contextlib.nullcontext():
                    if self.follow is not None:
                        if self.follow.owns(on_done):
                            self.follow.started()
                        else:
                            await self.follow.hold_back()
                    self.gateway.may_send()  # a fenced-off shard attempt stops here
                    self.calling += 1
                    try:
                        result = self.gateway.redact(
                            await backend.complete(call.request, call.key,
                                                   self.gateway.idempotency_of(call)))
                    finally:
                        self.calling -= 1
                self.progress.finished(call.request, result)
                # The commit wait runs in its own task: the worker goes on to the next call.
                self.group.create_task(self._done(on_done, call, result))
                if self.calling == 0 and not any(self.queues.values()):
                    # The last call in flight has returned: nothing can join its commit.
                    # Scheduled after the task above, whose first step queues the row.
                    asyncio.get_running_loop().call_soon(self.gateway.flush_soon)
        finally:
            self.workers[model] -= 1

    async def _done(self, on_done: OnDone, call: Call, result: ChatResult) -> None:
        try:
            await on_done(call, result)
        finally:
            self.outstanding -= 1
            if self.outstanding == 0:
                self.wake.set()


class FollowUps:
    """Requests that results of a batch ask for: looked up in the ledger in bunches
    (one query per bunch, off the event loop) and sent through the same pools when
    not stored."""

    def __init__(self, gateway: BatchHost, follow_up: FollowUp | None, seen: set[str],
                 failed_since: datetime | None = None) -> None:
        self.gateway = gateway
        # the batch's reuse_failed_since: a follow-up the run already attempted and saw
        # fail is served as stored, as a primary is (a round or an entry asked again)
        self.failed_since = failed_since
        self.follow_up = follow_up
        self.on_settled = follow_up.settled if isinstance(follow_up, SettledHook) else None
        self.seen = seen  # keys of this batch: a follow-up repeating one is not sent again
        self.pending: list[Call] = []
        self.pools: Pools | None = None
        self.all_submitted = False
        self.unique = self.from_ledger = self.sent = 0
        self.queued = 0  # follow-ups submitted to the pools, not yet taken by a worker
        self.room = 0  # backlog that keeps the follow-ups' endpoints busy
        self.waiters: deque[asyncio.Future[None]] = deque()
        self.ramping = True
        self.admitted = 0  # primaries let through the ramp
        self.progress = 0  # primary results known
        self.ramp_waiters: deque[asyncio.Future[None]] = deque()

    def start(self, pools: Pools) -> None:
        if self.follow_up is not None:
            self.pools = pools
            pools.follow = self
            pools.group.create_task(self._feed())
            asyncio.get_running_loop().call_later(RAMP_S, self._end_ramp)

    # -- ramp-up -----------------------------------------------------------
    # At the start no follow-up exists, so nothing held primaries back: every endpoint's
    # full concurrency went out at once (960 essays at the paper's scale), and the first
    # essays came back late, behind the client's and the server's work on all of them
    # (the judge's first call left after ~2.9 s, not ~0.4 s). So, slow-start style, the
    # first RAMP_FIRST primaries go, then RAMP_PER_RESULT more per primary result, until
    # RAMP_S has passed; from then on only the backlog rule below holds primaries back.
    # (Admitted primaries finish on their own, so the ramp never waits on follow-ups.)

    def _ramp_limit(self) -> int:
        return RAMP_FIRST + RAMP_PER_RESULT * self.progress

    async def _ramp(self) -> None:
        if not self.ramping or self.admitted < self._ramp_limit():
            self.admitted += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.ramp_waiters.append(waiter)
        await waiter  # _advance or _end_ramp count it as admitted

    def _advance(self, units: int) -> None:
        self.progress += units
        while self.ramp_waiters and self.admitted < self._ramp_limit():
            self._admit(self.ramp_waiters.popleft())

    def _end_ramp(self) -> None:
        self.ramping = False
        while self.ramp_waiters:
            self._admit(self.ramp_waiters.popleft())

    def _admit(self, waiter: asyncio.Future[None]) -> None:
        self.admitted += 1
        if not waiter.done():
            waiter.set_result(None)

    # -- backpressure ------------------------------------------------------
    # Follow-ups wait for a worker when their endpoints are the bottleneck (the judge
    # behind 15 writers). Sending more primaries then only adds load: on a busy client
    # their replies queue in the event loop ahead of the follow-ups' (measured: judge
    # latency 0.3 s -> 4 s while 960 essays were in flight). So while the backlog is
    # over ``room`` a primary waits for a follow-up to start (one lets one through), at
    # most HOLD_BACK_MAX_S per call: a stuck follow-up endpoint slows primaries, never
    # stops them.

    def owns(self, on_done: OnDone) -> bool:
        return on_done == self._commit

    def backlog(self) -> int:
        return len(self.pending) + self.queued

    async def hold_back(self) -> None:
        await self._ramp()
        if self.backlog() <= self.room:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(waiter, HOLD_BACK_MAX_S)

    def started(self) -> None:
        """A follow-up was taken by a worker: let one primary through (all of them once
        the backlog is within ``room``)."""
        self.queued -= 1
        release_all = self.backlog() <= self.room
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                if not release_all:
                    break

    def after(self, request: ChatRequest, result: ChatResult) -> list[ChatRequest]:
        """Ask ``request``'s follow-ups of its result; returns those not asked before
        (what this batch may send for it)."""
        asked: list[ChatRequest] = []
        if self.follow_up is None or self.pools is None:
            return asked
        self._advance(1)
        for extra in self.follow_up(request, result):
            if self.gateway.batched(extra.model):
                continue  # its batch is submitted by the batch that asks for it
            call = self.gateway.prepare(extra)
            if call.key not in self.seen:
                self.seen.add(call.key)
                self.pending.append(call)
                self.unique += 1
                asked.append(extra)
        if self.pending:
            self.pools.wake.set()  # wakes the feeder
        return asked

    def close_when_idle(self) -> None:
        """Every primary request is submitted: the feeder ends once nothing is pending
        or outstanding."""
        self.all_submitted = True
        if self.pools is not None:
            self.pools.wake.set()

    async def _feed(self) -> None:
        pools = self.pools
        assert pools is not None
        while True:
            await pools.wake.wait()
            pools.wake.clear()
            if not self.pending:
                if self.all_submitted and pools.outstanding == 0:
                    return
                continue
            batch, self.pending = self.pending, []
            stored = await asyncio.to_thread(self.gateway.lookup_ok, [c.key for c in batch],
                                             self.failed_since)
            self.from_ledger += len(stored)
            for call in batch:
                if call.key not in stored:
                    self.sent += 1
                    self.queued += 1
                    self.room = max(self.room,
                                    2 * self.gateway.spec(call.request.model).max_concurrency)
                    pools.submit(call, self._commit)
            pools.wake.set()  # look again: more may have come in during the look-up

    async def _commit(self, call: Call, result: ChatResult) -> None:
        await self.gateway.record(call, result)
        self.gateway.hold(call, result)
        if self.on_settled is not None:
            self.on_settled(call.request, result)
