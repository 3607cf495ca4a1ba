"""The gateway: registry + backends + ledger. What every stage calls to talk to LLMs.

``Gateway.run`` takes a batch of requests and returns one result per request, in
order. Calls whose key already has a successful row in the ledger are served from
it without a request; the rest are sent concurrently (each endpoint's limiter
bounds them) and each is committed to the ledger the moment it finishes. A request
repeated within a batch is sent once.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from essaybench.llm.client import ChatBackend, OpenAICompatBackend, request_key
from essaybench.llm.ledger import Ledger, ledger_row
from essaybench.llm.ratelimit import EndpointLimiter
from essaybench.llm.registry import ModelSpec, Registry
from essaybench.llm.retry import Backoff
from essaybench.llm.types import ChatRequest, ChatResult

ProgressCallback = Callable[[ChatResult, int, int], None]
T = TypeVar("T")


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a batch of calls from synchronous code (a Prefect task, the CLI)."""
    return asyncio.run(coro)


@dataclass(frozen=True)
class BatchStats:
    requested: int
    unique: int
    from_ledger: int
    sent: int


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

    async def _record(self, request: ChatRequest, result: ChatResult) -> None:
        spec = self.spec(request.model)
        await self.ledger.record(ledger_row(
            result, endpoint=spec.base_url, model_id=spec.model_id,
            request={"messages": [m.model_dump() for m in request.messages],
                     "params": spec.effective_params(request.params),
                     "schema": request.response_schema,
                     "sample_index": request.sample_index}))

    async def run(
        self, requests: Sequence[ChatRequest], progress: ProgressCallback | None = None
    ) -> list[ChatResult]:
        keys = [request_key(self.spec(r.model), r) for r in requests]
        for model in {r.model for r in requests}:
            # A missing key fails the batch before anything is sent, naming the variable.
            self.spec(model).api_key()
        stored = self.ledger.lookup_ok(keys)
        first: dict[str, ChatRequest] = {}
        for key, request in zip(keys, requests, strict=True):
            if key not in stored:
                first.setdefault(key, request)
        total = len(first)
        done = 0
        results: dict[str, ChatResult] = dict(stored)

        queues: dict[str, deque[tuple[str, ChatRequest]]] = {}
        for key, request in first.items():
            queues.setdefault(request.model, deque()).append((key, request))

        async def store(key: str, request: ChatRequest, result: ChatResult) -> None:
            nonlocal done
            await self._record(request, result)  # durable before anyone sees the result
            results[key] = result
            done += 1
            if progress is not None:
                progress(result, done, total)

        async def worker(queue: deque[tuple[str, ChatRequest]],
                         group: asyncio.TaskGroup) -> None:
            # A fixed pool of workers per endpoint instead of one task per request: far
            # fewer tasks and semaphore waits at 10k calls. The commit wait happens in its
            # own task, so a worker goes straight on to the next request.
            while queue:
                key, request = queue.popleft()
                result = await self.backend(request.model).complete(request, key)
                group.create_task(store(key, request, result))

        self._active_runs += 1
        try:
            async with asyncio.TaskGroup() as group:
                for model, queue in queues.items():
                    for _ in range(min(len(queue), self.spec(model).max_concurrency)):
                        group.create_task(worker(queue, group))
        finally:
            self._active_runs -= 1
            if self._active_runs == 0:
                await self.aclose()
        self.last_stats = BatchStats(requested=len(requests), unique=len(set(keys)),
                                     from_ledger=len({k for k in keys if k in stored}),
                                     sent=total)
        return [results[k] for k in keys]
