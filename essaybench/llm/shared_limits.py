"""Provider limits shared by every process of a run: a sharded run's shards draw one
model's concurrency, requests per minute and tokens per minute from one pool, so their sum
stays within the entry's limits and a busy shard uses what idle shards leave (dividing
the limits among the shards capped each at its share, even when the others had finished).

The limits are a slot service's named limits (``SlotService``): a concurrency limit held
for each attempt, and two rate limits whose slots decay — the token buckets of
``llm.ratelimit`` (same rate, same ten-second burst) kept by the service instead of the
process. Names belong to the registry entry, as the in-process limiter does: one entry,
one set of limits, whichever run or shard calls it. ``LocalSlots`` keeps them in this
process (tests; shards run in one process); the orchestration layer's Prefect service
(``essaybench.tasks.limits``, Prefect's global concurrency and rate limits) shares them
between hosts.

Retry-After still pauses only the process that got the 429 (``SharedLimiter.pause``):
the other shards learn of it from their own 429s; the shared rate limits keep that rare.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

from essaybench.llm.ratelimit import BURST_SECONDS, LimiterFactory
from essaybench.llm.registry import ModelSpec

DEFAULT_PREFIX = "essaybench"
POLL_S = 0.005  # LocalSlots: how often a waiting attempt looks again


@dataclass(frozen=True)
class SharedLimit:
    """One named limit: ``limit`` slots; ``decay_per_s`` 0 for a concurrency limit (a slot
    is held while the attempt runs), > 0 for a rate limit (a slot taken frees itself at
    that rate: ``limit`` is the burst)."""

    name: str
    limit: int
    decay_per_s: float = 0.0


@dataclass(frozen=True)
class ModelLimits:
    concurrency: SharedLimit
    requests: SharedLimit | None = None
    tokens: SharedLimit | None = None

    def all(self) -> list[SharedLimit]:
        return [x for x in (self.concurrency, self.requests, self.tokens) if x is not None]


def limit_name(prefix: str, model: str, kind: str) -> str:
    """``<prefix>-<model>-<kind>`` (registry names are letters, digits, '.', '_' and '-':
    valid in a limit's name)."""
    return f"{prefix}-{model}-{kind}"


def _rate(name: str, per_minute: int) -> SharedLimit:
    rate = per_minute / 60.0
    return SharedLimit(name, max(1, int(rate * BURST_SECONDS)), rate)


def model_limits(spec: ModelSpec, prefix: str = DEFAULT_PREFIX) -> ModelLimits:
    """The registry entry's limits as named shared limits: its ``max_concurrency``, and its
    ``rpm``/``tpm`` (when set) as buckets with ``llm.ratelimit``'s rate and burst."""
    return ModelLimits(
        SharedLimit(limit_name(prefix, spec.name, "concurrency"), spec.max_concurrency),
        _rate(limit_name(prefix, spec.name, "rpm"), spec.rpm) if spec.rpm else None,
        _rate(limit_name(prefix, spec.name, "tpm"), spec.tpm) if spec.tpm else None)


class SlotService(Protocol):
    """Where shared limits live. ``hold`` a concurrency limit's slot for a block; ``take``
    ``amount`` slots of a rate limit (they decay; never released)."""

    def hold(self, name: str) -> AbstractAsyncContextManager[None]: ...

    async def take(self, name: str, amount: int) -> None: ...


class SharedLimiter:
    """One entry's ``llm.ratelimit.Limiter`` drawing from shared limits: an attempt holds a
    concurrency slot, then takes a request and its estimated tokens from the rate limits,
    in the in-process limiter's order. A Retry-After pauses this process's attempts."""

    def __init__(self, limits: ModelLimits, service: SlotService,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.service = service
        self.clock = clock
        self.paused_until = 0.0

    def pause(self, seconds: float) -> None:
        self.paused_until = max(self.paused_until, self.clock() + max(0.0, seconds))

    @asynccontextmanager
    async def slot(self, estimated_tokens: int = 0) -> AsyncIterator[None]:
        while (delay := self.paused_until - self.clock()) > 0:
            await asyncio.sleep(delay)
        async with self.service.hold(self.limits.concurrency.name):
            if self.limits.requests is not None:
                await self.service.take(self.limits.requests.name, 1)
            tokens = self.limits.tokens
            if tokens is not None and estimated_tokens > 0:
                # A request larger than the burst would wait forever (the service refuses
                # more slots than the limit): it takes the whole burst, as in-process.
                await self.service.take(tokens.name, min(estimated_tokens, tokens.limit))
            yield


def shared_limiters(service: SlotService, prefix: str = DEFAULT_PREFIX) -> LimiterFactory:
    """A gateway's ``limits``: each entry's limiter draws from ``service``."""
    return lambda spec: SharedLimiter(model_limits(spec, prefix), service)


class LocalSlots:
    """A ``SlotService`` in this process: a counter per concurrency limit and a token
    bucket per rate limit (``llm.ratelimit``'s rate and burst), shared by every gateway
    that uses it, whatever its thread or event loop (shards side by side in one process)."""

    def __init__(self, limits: Iterable[SharedLimit],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._limits = {x.name: x for x in limits}
        self._lock = threading.Lock()
        self._held = dict.fromkeys(self._limits, 0)
        self._tokens = {x.name: float(x.limit) for x in self._limits.values()}
        self._updated = dict.fromkeys(self._limits, clock())
        self.clock = clock
        self.peak = dict.fromkeys(self._limits, 0)  # most slots held at once, per limit

    @classmethod
    def for_specs(cls, specs: Iterable[ModelSpec], prefix: str = DEFAULT_PREFIX) -> LocalSlots:
        return cls(x for spec in specs for x in model_limits(spec, prefix).all())

    def _try_hold(self, name: str) -> bool:
        with self._lock:
            if self._held[name] >= self._limits[name].limit:
                return False
            self._held[name] += 1
            self.peak[name] = max(self.peak[name], self._held[name])
            return True

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        while not self._try_hold(name):  # polled: no asyncio primitive spans event loops
            await asyncio.sleep(POLL_S)
        try:
            yield
        finally:
            with self._lock:
                self._held[name] -= 1

    def _try_take(self, name: str, amount: int) -> float:
        """0 when taken, else the seconds until the bucket could have ``amount``."""
        limit = self._limits[name]
        with self._lock:
            now = self.clock()
            tokens = min(float(limit.limit), self._tokens[name]
                         + (now - self._updated[name]) * limit.decay_per_s)
            self._updated[name] = now
            if tokens >= amount:
                self._tokens[name] = tokens - amount
                return 0.0
            self._tokens[name] = tokens
            return (amount - tokens) / limit.decay_per_s

    async def take(self, name: str, amount: int) -> None:
        amount = min(amount, self._limits[name].limit)
        while (wait := self._try_take(name, amount)) > 0:
            await asyncio.sleep(max(wait, POLL_S))
