"""The gateway: registry + backends + ledger. What every stage calls to talk to LLMs.

``Gateway.run`` takes a batch of requests and returns one result per request, in
order. Calls whose key already has a successful row in the ledger are served from
it without a request; the rest are sent concurrently (each endpoint's limiter
bounds them) and each is committed to the ledger the moment it finishes. A request
repeated within a batch is sent once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from essaybench.gcfreeze import frozen_heap
from essaybench.llm.client import ChatBackend, OpenAICompatBackend, canonical_request
from essaybench.llm.ledger import Ledger, ledger_row
from essaybench.llm.ratelimit import EndpointLimiter
from essaybench.llm.registry import ModelSpec, Registry
from essaybench.llm.retry import Backoff
from essaybench.llm.types import ChatRequest, ChatResult, key_of

ProgressCallback = Callable[[ChatResult, int, int], None]
# Requests a finished call asks for (e.g. the judge calls of a fresh essay).
FollowUp = Callable[[ChatRequest, ChatResult], Sequence[ChatRequest]]
T = TypeVar("T")
HOLD_BACK_MAX_S = 5.0  # longest a primary call waits for follow-ups to catch up
# Start of a batch with follow-ups: primaries ramp up (see _FollowUps), for at most RAMP_S.
RAMP_FIRST = 128
RAMP_PER_RESULT = 2
RAMP_S = 5.0


@dataclass(frozen=True, slots=True)
class _Call:
    """A request on its way: its key and the canonical JSON the key hashes (which the
    ledger stores), computed once; None when the key came from an equal held request
    (see ``Gateway._call``), in which case it is computed if the call is recorded."""

    key: str
    canonical: str | None
    request: ChatRequest


def _identity(request: ChatRequest) -> tuple[str, str, str, int]:
    return (request.model, request.stage, request.tag, request.sample_index)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a batch of calls from synchronous code (a Prefect task, the CLI)."""
    return asyncio.run(coro)


@dataclass(frozen=True)
class BatchStats:
    requested: int
    unique: int
    from_ledger: int
    sent: int
    follow_ups: int = 0  # distinct follow-up requests new to the batch
    follow_ups_from_ledger: int = 0
    follow_ups_sent: int = 0
    # Results of an earlier batch's follow-ups handed over in memory (not counted in
    # from_ledger, though the ledger has them too).
    from_follow_ups: int = 0


class Gateway:
    def __init__(
        self,
        registry: Registry,
        ledger: Ledger,
        *,
        base_urls: dict[str, str] | None = None,
        backends: dict[str, ChatBackend] | None = None,
        backoff: Backoff | None = None,
        seed: int | None = None,
    ) -> None:
        self.registry = registry
        self.ledger = ledger
        self.base_urls = dict(base_urls or {})
        self._given: dict[str, ChatBackend] = dict(backends or {})
        self._backends: dict[str, ChatBackend] = {}
        self._limiters: dict[str, EndpointLimiter] = {}
        self._active_runs = 0  # the HTTP clients close when the last concurrent run ends
        self.backoff = backoff
        self.seed = seed
        self.last_stats: BatchStats | None = None
        # Results of follow-up calls (e.g. judge calls sent while generating), kept until a
        # later batch of this gateway asks for them: the stage that follows gets them
        # without reading them back from the ledger, where they are stored all the same.
        self._settled: dict[str, tuple[ChatRequest, ChatResult]] = {}
        self._settled_keys: dict[tuple[str, str, str, int], str] = {}  # by _identity

    def backend(self, model: str) -> ChatBackend:
        """The backend of ``model`` for the running batch. HTTP clients bind to an event
        loop, so they live for one ``run``; limiter state is kept across batches."""
        if model in self._given:
            return self._given[model]
        if model not in self._backends:
            spec = self.registry.get(model)
            url = self.base_urls.get(model)
            if url is None and spec.base_url == "embedded":
                raise RuntimeError(
                    f"model {model!r} is the embedded model: start it with "
                    "essaybench.llm.embedded (open_gateway does) and pass its URL")
            limiter = self._limiters.setdefault(
                model, EndpointLimiter(spec.max_concurrency, spec.rpm, spec.tpm))
            self._backends[model] = OpenAICompatBackend(spec, url, limiter=limiter,
                                                        backoff=self.backoff, seed=self.seed)
        return self._backends[model]

    def spec(self, model: str) -> ModelSpec:
        return self.registry.get(model)

    async def aclose(self) -> None:
        """Close the HTTP clients of the last batch (``run`` does this itself)."""
        backends, self._backends = self._backends, {}
        for backend in backends.values():
            await backend.aclose()

    async def _record(self, call: _Call, result: ChatResult) -> None:
        spec = self.spec(call.request.model)
        canonical = call.canonical or canonical_request(spec, call.request)
        await self.ledger.record(ledger_row(result, endpoint=spec.base_url,
                                            model_id=spec.model_id, request=canonical))

    def _call(self, request: ChatRequest) -> _Call:
        # A request equal to a held follow-up's (the judge stage rebuilding the calls sent
        # while generating) has its key: no need to encode and hash ~5 KB again.
        key = self._settled_keys.get(_identity(request))
        if key is not None and key in self._settled and self._settled[key][0] == request:
            return _Call(key, None, request)
        canonical = canonical_request(self.spec(request.model), request)
        return _Call(key_of(canonical), canonical, request)

    def _hold(self, call: _Call, result: ChatResult) -> None:
        self._settled[call.key] = (call.request, result)
        self._settled_keys[_identity(call.request)] = call.key

    def _take_settled(self, keys: Sequence[str],
                      failed_since: datetime | None) -> dict[str, ChatResult]:
        """The held follow-up results ``keys`` ask for, by the ledger's rule: a success
        always, a failure only when it finished at or after ``failed_since``. Each is
        handed over once (the ledger still has it)."""
        found: dict[str, ChatResult] = {}
        for key in keys:
            held = self._settled.pop(key, None)
            if held is None:
                continue
            request, result = held
            self._settled_keys.pop(_identity(request), None)
            if (result.ok or (
                    failed_since is not None and result.finished_at is not None
                    and result.finished_at >= failed_since)):
                found[key] = result
        return found

    async def run(
        self, requests: Sequence[ChatRequest], progress: ProgressCallback | None = None,
        follow_up: FollowUp | None = None, reuse_failed_since: datetime | None = None,
    ) -> list[ChatResult]:
        """One result per request, in order. ``follow_up(request, result)`` is called once
        for each request when its result is known (served from the ledger, or committed);
        the requests it returns join this batch: the same ledger look-up, de-duplication,
        limits and retries, committed as they finish, but not returned (a later stage
        finds them in the ledger). The batch ends when they are done too.

        ``reuse_failed_since``: a call that failed at or after this moment is served as
        stored instead of re-sent — within one run a call is attempted once (its failure
        was already paid for, e.g. by a prefetch); a later rerun retries it."""
        with frozen_heap():
            return await self._run(requests, progress, follow_up, reuse_failed_since)

    async def _run(
        self, requests: Sequence[ChatRequest], progress: ProgressCallback | None,
        follow_up: FollowUp | None, reuse_failed_since: datetime | None,
    ) -> list[ChatResult]:
        for model in {r.model for r in requests}:
            # A missing key fails the batch before anything is sent, naming the variable.
            self.spec(model).api_key()
        calls = [self._call(r) for r in requests]
        keys = [c.key for c in calls]
        stored = self._take_settled(keys, reuse_failed_since)
        held = len(stored)
        wanted = [k for k in dict.fromkeys(keys) if k not in stored]
        if wanted:
            stored.update(self.ledger.lookup_ok(wanted, reuse_failed_since))
        first: dict[str, _Call] = {}
        for call in calls:
            if call.key not in stored:
                first.setdefault(call.key, call)
        total = len(first)
        done = 0
        results: dict[str, ChatResult] = dict(stored)
        follow = _FollowUps(self, follow_up, seen=set(keys))

        async def finish(call: _Call, result: ChatResult) -> None:
            nonlocal done
            await self._record(call, result)  # durable before anyone sees the result
            results[call.key] = result
            done += 1
            if progress is not None:
                progress(result, done, total)
            follow.after(call.request, result)

        self._active_runs += 1
        try:
            async with asyncio.TaskGroup() as group:
                pools = _Pools(self, group)
                follow.start(pools)
                for call in first.values():
                    pools.submit(call, finish)
                # Stored results may need their follow-ups sent (a rerun after a crash).
                for call in calls:
                    if call.key in stored:
                        follow.after(call.request, stored[call.key])
                follow.close_when_idle()
        finally:
            self._active_runs -= 1
            if self._active_runs == 0:
                await self.aclose()
        self.last_stats = BatchStats(requested=len(requests), unique=len(set(keys)),
                                     from_ledger=len({k for k in keys if k in stored}) - held,
                                     from_follow_ups=held, sent=total, follow_ups=follow.unique,
                                     follow_ups_from_ledger=follow.from_ledger,
                                     follow_ups_sent=follow.sent)
        return [results[k] for k in keys]


OnDone = Callable[[_Call, ChatResult], Coroutine[Any, Any, None]]


class _Pools:
    """A pool of workers per endpoint over its queue, instead of one task per request:
    far fewer tasks and semaphore waits at 10k calls. Requests may be added while the
    batch runs; workers are spawned up to the endpoint's concurrency."""

    def __init__(self, gateway: Gateway, group: asyncio.TaskGroup) -> None:
        self.gateway = gateway
        self.group = group
        self.queues: dict[str, deque[tuple[_Call, OnDone]]] = {}
        self.workers: dict[str, int] = {}
        self.follow: _FollowUps | None = None  # set when the batch has follow-ups
        self.outstanding = 0  # submitted, not yet through ``on_done``
        self.wake = asyncio.Event()  # set when outstanding reaches 0 (and by follow-ups)

    def submit(self, call: _Call, on_done: OnDone) -> None:
        model = call.request.model
        queue = self.queues.setdefault(model, deque())
        queue.append((call, on_done))
        self.outstanding += 1
        if self.workers.get(model, 0) < self.gateway.spec(model).max_concurrency:
            self.workers[model] = self.workers.get(model, 0) + 1
            self.group.create_task(self._worker(model, queue))

    async def _worker(self, model: str, queue: deque[tuple[_Call, OnDone]]) -> None:
        try:
            while queue:
                call, on_done = queue.popleft()
                if self.follow is not None:
                    if self.follow.owns(on_done):
                        self.follow.started()
                    else:
                        await self.follow.hold_back()
                result = await self.gateway.backend(model).complete(call.request, call.key)
                # The commit wait runs in its own task: the worker goes on to the next call.
                self.group.create_task(self._done(on_done, call, result))
        finally:
            self.workers[model] -= 1

    async def _done(self, on_done: OnDone, call: _Call, result: ChatResult) -> None:
        try:
            await on_done(call, result)
        finally:
            self.outstanding -= 1
            if self.outstanding == 0:
                self.wake.set()


class _FollowUps:
    """Requests that results of a batch ask for: looked up in the ledger in bunches
    (one query per bunch, off the event loop) and sent through the same pools when
    not stored."""

    def __init__(self, gateway: Gateway, follow_up: FollowUp | None, seen: set[str]) -> None:
        self.gateway = gateway
        self.follow_up = follow_up
        self.seen = seen  # keys of this batch: a follow-up repeating one is not sent again
        self.pending: list[_Call] = []
        self.pools: _Pools | None = None
        self.all_submitted = False
        self.unique = self.from_ledger = self.sent = 0
        self.queued = 0  # follow-ups submitted to the pools, not yet taken by a worker
        self.room = 0  # backlog that keeps the follow-ups' endpoints busy
        self.waiters: deque[asyncio.Future[None]] = deque()
        self.ramping = True
        self.admitted = 0  # primaries let through the ramp
        self.progress = 0  # primary results known
        self.ramp_waiters: deque[asyncio.Future[None]] = deque()

    def start(self, pools: _Pools) -> None:
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

    def after(self, request: ChatRequest, result: ChatResult) -> None:
        if self.follow_up is None or self.pools is None:
            return
        self._advance(1)
        for extra in self.follow_up(request, result):
            call = self.gateway._call(extra)
            if call.key not in self.seen:
                self.seen.add(call.key)
                self.pending.append(call)
                self.unique += 1
        if self.pending:
            self.pools.wake.set()  # wakes the feeder

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
            stored = await asyncio.to_thread(self.gateway.ledger.lookup_ok,
                                             [c.key for c in batch])
            self.from_ledger += len(stored)
            for call in batch:
                if call.key not in stored:
                    self.sent += 1
                    self.queued += 1
                    self.room = max(self.room,
                                    2 * self.gateway.spec(call.request.model).max_concurrency)
                    pools.submit(call, self._commit)
            pools.wake.set()  # look again: more may have come in during the look-up

    async def _commit(self, call: _Call, result: ChatResult) -> None:
        await self.gateway._record(call, result)
        self.gateway._hold(call, result)
