"""Per-endpoint limits: concurrency, requests per minute, tokens per minute, Retry-After.

Rates are token buckets refilled continuously, with a burst of ten seconds' worth,
so a batch starts quickly but never exceeds the per-minute limits over any minute
by more than that burst. A 429's Retry-After pauses the whole endpoint, not just
the request that got it: the provider is telling every request to wait.

The numeric state outlives any one event loop (a pipeline sends several batches,
each under its own ``asyncio.run``); the asyncio primitives, which bind to a loop,
are made per loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from essaybench.llm.registry import ModelSpec

BURST_SECONDS = 10.0


class Limiter(Protocol):
    """What a backend asks of one endpoint's limits: a slot per attempt, and a pause when
    the provider says Retry-After. ``EndpointLimiter`` keeps them in this process;
    ``llm.shared_limits.SharedLimiter`` shares them with every process of a run."""

    def slot(self, estimated_tokens: int = 0) -> AbstractAsyncContextManager[None]: ...

    def pause(self, seconds: float) -> None: ...


# How a gateway makes each registry entry's limiter (once per entry, kept across batches).
LimiterFactory = Callable[["ModelSpec"], Limiter]


def local_limiter(spec: ModelSpec) -> EndpointLimiter:
    """The entry's limits, kept in this process (the default)."""
    return EndpointLimiter(spec.max_concurrency, spec.rpm, spec.tpm)


class TokenBucket:
    def __init__(self, per_minute: float, clock: Callable[[], float] = time.monotonic) -> None:
        if per_minute <= 0:
            raise ValueError(f"rate must be positive, got {per_minute}")
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * BURST_SECONDS)
        self.tokens = self.capacity
        self.clock = clock
        self.updated = clock()
        self._locks: dict[int, asyncio.Lock] = {}  # per loop; FIFO within it

    def _refill(self) -> None:
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now

    async def take(self, amount: float = 1.0) -> None:
        # A single request larger than the bucket would otherwise wait forever.
        amount = min(amount, self.capacity)
        loop = id(asyncio.get_running_loop())
        lock = self._locks.get(loop)
        if lock is None:
            self._locks = {loop: (lock := asyncio.Lock())}  # drop locks of finished loops
        async with lock:
            while True:
                self._refill()
                if self.tokens >= amount:
                    self.tokens -= amount
                    return
                await asyncio.sleep((amount - self.tokens) / self.rate)


class EndpointLimiter:
    """Everything that throttles one endpoint, shared by all its requests."""

    def __init__(self, max_concurrency: int, rpm: int | None = None, tpm: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        self.max_concurrency = max_concurrency
        self._semaphores: dict[int, asyncio.Semaphore] = {}
        self.requests = TokenBucket(rpm, clock) if rpm else None
        self.tokens = TokenBucket(tpm, clock) if tpm else None
        self.clock = clock
        self.paused_until = 0.0

    def pause(self, seconds: float) -> None:
        """Hold every request to this endpoint for ``seconds`` (from a Retry-After)."""
        self.paused_until = max(self.paused_until, self.clock() + max(0.0, seconds))

    async def _wait_for_pause(self) -> None:
        while (delay := self.paused_until - self.clock()) > 0:
            await asyncio.sleep(delay)

    def _semaphore(self) -> asyncio.Semaphore:
        loop = id(asyncio.get_running_loop())
        semaphore = self._semaphores.get(loop)
        if semaphore is None:
            self._semaphores = {loop: (semaphore := asyncio.Semaphore(self.max_concurrency))}
        return semaphore

    @asynccontextmanager
    async def slot(self, estimated_tokens: int = 0) -> AsyncIterator[None]:
        async with self._semaphore():
            await self._wait_for_pause()
            if self.requests is not None:
                await self.requests.take(1)
            if self.tokens is not None and estimated_tokens > 0:
                await self.tokens.take(estimated_tokens)
            yield
