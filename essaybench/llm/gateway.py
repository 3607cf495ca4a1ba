"""The gateway: registry + backends + ledger. What every stage calls to talk to LLMs.
Each registry entry's ``protocol`` names the backend class sending its calls
(``llm.backends``).

``Gateway.run`` takes a batch of requests and returns one result per request, in
order. Calls whose key already has a successful row in the ledger, paid for by a run
the gateway's ``ReuseScope`` allows, are served from it without a request; the rest
are sent concurrently (each endpoint's limiter bounds them) and each is committed to
the ledger, under the scope's run, the moment it finishes. A request repeated within a
batch is sent once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from essaybench.core.gcfreeze import frozen_heap
from essaybench.llm.backends import backend_class
from essaybench.llm.batching import BatchHandle, BatchPort, Call, FollowUp, FollowUps, Pools
from essaybench.llm.client import ChatBackend, canonical_request, idempotency_token
from essaybench.llm.ledger import Ledger, ledger_row
from essaybench.llm.progress import Progress, current_progress
from essaybench.llm.ratelimit import Limiter, LimiterFactory, local_limiter
from essaybench.llm.redact import ResultRedactor
from essaybench.llm.registry import ModelSpec, Registry
from essaybench.llm.replicas import ReplicaPool
from essaybench.llm.retry import Backoff
from essaybench.llm.scope import ANY_RUN, ReuseScope
from essaybench.llm.types import ChatRequest, ChatResult, key_of

ProgressCallback = Callable[[ChatResult, int, int], None]
T = TypeVar("T")


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
        base_urls: Mapping[str, str | ReplicaPool] | None = None,
        backends: dict[str, ChatBackend] | None = None,
        backoff: Backoff | None = None,
        seed: int | None = None,
        scope: ReuseScope = ANY_RUN,
        observer: Progress | None = None,
        limits: LimiterFactory = local_limiter,
    ) -> None:
        self.registry = registry
        # Makes each entry's limiter: kept in this process (the default), or shared with
        # every shard of a run (llm.shared_limits; a shard's task passes Prefect's).
        self.limits = limits
        # Sends the calls of entries with a batch API (registry ``batch``): set by
        # open_gateway (llm.batch.route); None: every call goes direct.
        self.batches: BatchPort | None = None
        # Told of every call sent (see llm.progress); None: the process's, read per batch.
        self.observer = observer
        self.ledger = ledger
        # The run new calls are recorded under and the runs whose calls are served; one
        # per gateway (a session serves one run), read by every look-up and record.
        self.scope = scope
        self.base_urls = dict(base_urls or {})
        self._given: dict[str, ChatBackend] = dict(backends or {})
        self._backends: dict[str, ChatBackend] = {}
        self._limiters: dict[str, Limiter] = {}
        self._active_runs = 0  # the HTTP clients close when the last concurrent run ends
        self.backoff = backoff
        self.seed = seed
        self._redactor = ResultRedactor(spec.api_key_env for spec in registry.models.values())
        self.last_stats: BatchStats | None = None
        self.sent_total = 0  # calls sent (first requests and follow-ups) by every batch
        # Results of follow-up calls (e.g. judge calls sent while generating), kept until a
        # later batch of this gateway asks for them: the stage that follows gets them
        # without reading them back from the ledger, where they are stored all the same.
        # Each with the run that paid for it: handed over only within a scope allowing it.
        self._settled: dict[str, tuple[ChatRequest, ChatResult, str | None]] = {}
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
            limiter = self._limiters.get(model)
            if limiter is None:
                limiter = self._limiters[model] = self.limits(spec)
            # The entry's protocol names its backend class (llm.backends): looked up
            # once per model and batch, never per call.
            self._backends[model] = backend_class(spec.protocol)(
                spec, url, limiter=limiter, backoff=self.backoff, seed=self.seed)
        return self._backends[model]

    def spec(self, model: str) -> ModelSpec:
        return self.registry.get(model)

    async def aclose(self) -> None:
        """Close the HTTP clients of the last batch (``run`` does this itself)."""
        backends, self._backends = self._backends, {}
        for backend in backends.values():
            await backend.aclose()

    def redact(self, result: ChatResult) -> ChatResult:
        """``result`` with no secret in its error or failed reply (see ``llm.redact``)."""
        return self._redactor(result)

    async def record(self, call: Call, result: ChatResult) -> None:
        """Commit a finished call to the ledger; returns once it is durable."""
        spec = self.spec(call.request.model)
        canonical = call.canonical or canonical_request(spec, call.request)
        await self.ledger.record(ledger_row(result, endpoint=spec.base_url,
                                            model_id=spec.model_id, request=canonical,
                                            run_id=self.scope.run_id))

    def prepare(self, request: ChatRequest) -> Call:
        """``request`` with its key and canonical text."""
        # A request equal to a held follow-up's (the judge stage rebuilding the calls sent
        # while generating) has its key: no need to encode and hash ~5 KB again.
        key = self._settled_keys.get(_identity(request))
        if key is not None and key in self._settled and self._settled[key][0] == request:
            return Call(key, None, request)
        canonical = canonical_request(self.spec(request.model), request)
        return Call(key_of(canonical), canonical, request)

    def idempotency_of(self, call: Call) -> str | None:
        """The call's idempotency token, when its calls are recorded under a run: every
        attempt at the call within the run (a crashed shard's, then its re-sent shard's)
        carries the same one. Within a run a recorded call is never sent again (its
        success or failure is served), so the token never names two deliberate attempts."""
        run_id = self.scope.run_id
        return None if run_id is None else idempotency_token(run_id, call.key)

    def may_send(self) -> None:
        self.ledger.check_open()

    def flush_soon(self) -> None:
        self.ledger.flush_soon()

    def lookup_ok(self, keys: Sequence[str],
                  failed_since: datetime | None = None) -> dict[str, ChatResult]:
        return self.ledger.lookup_ok(keys, failed_since, self.scope)

    def hold(self, call: Call, result: ChatResult) -> None:
        """Keep a follow-up's result for a later batch of this gateway (_take_settled)."""
        self._settled[call.key] = (call.request, result, self.scope.run_id)
        self._settled_keys[_identity(call.request)] = call.key

    def _take_settled(self, keys: Sequence[str],
                      failed_since: datetime | None) -> dict[str, ChatResult]:
        """The held follow-up results ``keys`` ask for, by the ledger's rule: a success
        always, a failure only when it finished at or after ``failed_since``; and only
        when the gateway's scope allows the run that paid for it. Each is handed over
        once (the ledger still has it)."""
        found: dict[str, ChatResult] = {}
        for key in keys:
            held = self._settled.get(key)
            if held is None or not self.scope.allows(held[2]):
                continue
            del self._settled[key]
            request, result, _ = held
            self._settled_keys.pop(_identity(request), None)
            if (result.ok or (
                    failed_since is not None and result.finished_at is not None
                    and result.finished_at >= failed_since)):
                found[key] = result
        return found

    async def run(
        self, requests: Sequence[ChatRequest], progress: ProgressCallback | None = None,
        follow_up: FollowUp | None = None, reuse_failed_since: datetime | None = None,
        *, direct: bool = False,
    ) -> list[ChatResult]:
        """One result per request, in order. ``follow_up(request, result)`` is called once
        for each request when its result is known (served from the ledger, or committed);
        the requests it returns join this batch: the same ledger look-up, de-duplication,
        limits and retries, committed as they finish, but not returned: a later batch of
        this gateway gets their results from memory (see ``hold``), any other from the
        ledger. The batch ends when they are done too.

        ``reuse_failed_since``: a call that failed at or after this moment (paid for by a
        run the scope allows) is served as stored instead of re-sent — within one run a
        call is attempted once (its failure was already paid for, e.g. by a prefetch); a
        later rerun retries it.

        The calls of entries with a batch API (``batch`` in the registry) go through it
        (``llm.batch.route``), unless ``direct``: submitted first, waited for after the
        direct calls; their results go to ``progress`` but ask for no follow-ups (a later
        batch sends those), and follow-ups for such entries are left to a later batch."""
        with frozen_heap():
            return await self._run(requests, progress, follow_up, reuse_failed_since, direct)

    def batched(self, model: str) -> bool:
        """Whether ``model``'s calls go through its provider's batch API."""
        spec = self.spec(model)
        return self.batches is not None and spec.batch != "none" and not spec.is_embedded

    async def _run(
        self, requests: Sequence[ChatRequest], progress: ProgressCallback | None,
        follow_up: FollowUp | None, reuse_failed_since: datetime | None, direct: bool,
    ) -> list[ChatResult]:
        for model in {r.model for r in requests}:
            # A missing key fails the batch before anything is sent, naming the variable.
            self.spec(model).api_key()
        calls = [self.prepare(r) for r in requests]
        keys = [c.key for c in calls]
        stored = self._take_settled(keys, reuse_failed_since)
        held = len(stored)
        wanted = [k for k in dict.fromkeys(keys) if k not in stored]
        if wanted:
            stored.update(self.ledger.lookup_ok(wanted, reuse_failed_since, self.scope))
        first: dict[str, Call] = {}
        for call in calls:
            if call.key not in stored:
                first.setdefault(call.key, call)
        total = len(first)
        done = 0
        results: dict[str, ChatResult] = dict(stored)
        follow = FollowUps(self, follow_up, seen=set(keys), failed_since=reuse_failed_since)
        by_batch = [] if direct else [c for c in first.values() if self.batched(c.request.model)]
        handle: BatchHandle | None = None
        observer = self.observer or current_progress()
        observer.batch_started()  # ended in the finally below, or here if submitting fails
        if by_batch:
            assert self.batches is not None
            for call in by_batch:
                observer.planned(call.request)
            try:
                handle = await self.batches.submit(by_batch)
            except BaseException:
                observer.batch_ended()
                raise
            first = {k: c for k, c in first.items() if not self.batched(c.request.model)}
            batch_requests = {c.key: c.request for c in by_batch}

        async def finish(call: Call, result: ChatResult) -> None:
            nonlocal done
            await self.record(call, result)  # durable before anyone sees the result
            results[call.key] = result
            done += 1
            if progress is not None:
                progress(result, done, total)
            asked = follow.after(call.request, result)
            if follow_up is not None:  # so the ETA counts the follow-ups still to come
                observer.followed(call.request, asked)

        self._active_runs += 1
        try:
            async with asyncio.TaskGroup() as group:
                pools = Pools(self, group, observer)
                follow.start(pools)
                for call in first.values():
                    pools.submit(call, finish)
                # Stored results may need their follow-ups sent (a rerun after a crash).
                for call in calls:
                    if call.key in stored:
                        follow.after(call.request, stored[call.key])
                follow.close_when_idle()
            if handle is not None:  # after the direct calls
                for key, result in (await handle.wait()).items():
                    results[key] = result
                    done += 1
                    observer.finished(batch_requests[key], result)
                    if progress is not None:
                        progress(result, done, total)
        finally:
            observer.batch_ended()
            self._active_runs -= 1
            if self._active_runs == 0:
                await self.aclose()
        self.sent_total += total + follow.sent
        self.last_stats = BatchStats(requested=len(requests), unique=len(set(keys)),
                                     from_ledger=len({k for k in keys if k in stored}) - held,
                                     from_follow_ups=held, sent=total, follow_ups=follow.unique,
                                     follow_ups_from_ledger=follow.from_ledger,
                                     follow_ups_sent=follow.sent)
        return [results[k] for k in keys]
