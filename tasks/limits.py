"""Prefect's side of ``essaybench.llm.shared_limits``: each model's limits as Prefect global
concurrency limits on the run's Prefect server, shared by every shard on every host.

- The parent publishes them (``publish_limits``, before any shard is sent): one GCL per
  entry for ``max_concurrency``, and one with ``slot_decay_per_second`` per rpm/tpm (a
  rate limit: the burst is its limit, the rate its decay). Upserted: limits belong to the
  registry entry (the provider account), so a changed entry changes them for every run.
- A shard's gateway draws from them (``PrefectSlots``): each attempt holds a slot of the
  concurrency limit under a lease (renewed while a slow attempt runs), so the slots of a
  shard whose host dies come back when the lease expires (``LEASE_S``); it takes rpm/tpm
  slots that decay from the rate limits.

Cost: a busy shard makes two requests per concurrency slot every ``KEEP_S`` (acquire,
release), and one per call for each rpm/tpm limit.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from uuid import UUID

import httpx
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.exceptions import ObjectNotFound

from essaybench.llm.ratelimit import LimiterFactory
from essaybench.llm.registry import ModelSpec
from essaybench.llm.shared_limits import DEFAULT_PREFIX, SharedLimit, model_limits, shared_limiters
from essaybench.runs.shards import ShardRefused
from essaybench.stages.shard import ShardError

POLL_S = 0.2  # a full concurrency limit is asked again after 0.1-0.3 s
KEEP_S = 5.0  # a slot passes between this process's attempts this long, then goes back
HANDOFF_POLL_S = 0.01  # how often a waiting attempt looks for a slot freed in its process
# A held slot's lease: renewed every half of it while a slow attempt runs; the slots of a
# killed shard are free again within about this long (the server's minimum is 60 s).
LEASE_S = 60.0


class LimitsMissing(ShardError, ShardRefused):
    """A shard's shared limits are not on the Prefect server: every attempt would fail
    alike (its flow run ends Refused, not sent again)."""


@dataclass
class _Lease:
    id: UUID
    since: float  # when the server granted it


class PrefectSlots:
    """``SlotService`` on the Prefect server the process is configured for
    (PREFECT_API_URL), through the server's lease endpoints (what Prefect's
    ``concurrency()`` calls, without an event and a renewal thread per call). Limits must
    exist: a shard whose parent did not publish them fails instead of calling unlimited.

    A slot freed while other attempts of this process wait is handed to one of them
    instead of going back to the server, for up to ``keep_s`` after the server granted it;
    then it is released, so shards waiting elsewhere get their turn. A busy shard so makes
    two server requests per slot every ``keep_s``, not three per call (measured: 408 calls
    of 200 ms, judge limit 2 across 4 shards, took 88 s with ``concurrency()`` per call
    against 50 s with the limits split). A full limit is asked again every ``poll_s``
    (with jitter), not when the server's Retry-After says: that is sized for flow and
    task runs (average occupancy times the waiters, up to 30 s) and left slots idle."""

    def __init__(self, poll_s: float = POLL_S, keep_s: float = KEEP_S,
                 seed: int | None = None) -> None:
        self.poll_s = poll_s
        self.keep_s = keep_s
        self.rng = random.Random(seed)
        self._lock = threading.Lock()
        self._idle: dict[str, list[_Lease]] = {}
        self._waiting: dict[str, int] = {}
        self._client: SyncPrefectClient | None = None

    def client(self) -> SyncPrefectClient:
        with self._lock:
            if self._client is None:
                self._client = get_client(sync_client=True)
                self._client.__enter__()
            return self._client

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.__exit__(None, None, None)

    def _take_idle(self, name: str) -> _Lease | None:
        with self._lock:
            idle = self._idle.get(name)
            return idle.pop() if idle else None

    async def _acquire(self, name: str) -> _Lease:
        with self._lock:
            self._waiting[name] = self._waiting.get(name, 0) + 1
        try:
            ask_at = 0.0
            while True:
                if (lease := self._take_idle(name)) is not None:
                    return lease
                if time.monotonic() >= ask_at:
                    try:
                        response = await asyncio.to_thread(
                            self.client().increment_concurrency_slots_with_lease,
                            names=[name], slots=1, mode="concurrency",
                            lease_duration=LEASE_S)
                    except httpx.HTTPStatusError as exc:
                        if exc.response.status_code != 423:
                            raise
                        ask_at = time.monotonic() + self.poll_s * (0.5 + self.rng.random())
                    else:
                        granted = response.json()
                        if not granted.get("limits"):
                            raise LimitsMissing(f"the Prefect server has no global "
                                                f"concurrency limit {name}")
                        return _Lease(UUID(granted["lease_id"]), time.monotonic())
                await asyncio.sleep(HANDOFF_POLL_S)
        finally:
            with self._lock:
                self._waiting[name] -= 1
            await self._release_unwanted(name)

    async def _release_unwanted(self, name: str) -> None:
        """Idle slots nobody in this process waits for go back to the server."""
        with self._lock:
            if self._waiting.get(name, 0):
                return
            idle, self._idle[name] = self._idle.get(name, []), []
        for lease in idle:
            await self._release(lease)

    async def _release(self, lease: _Lease) -> None:
        await asyncio.to_thread(self.client().release_concurrency_slots_with_lease, lease.id)

    async def _renew(self, lease: _Lease) -> None:
        while True:  # only for an attempt held longer than half a lease (a slow call)
            await asyncio.sleep(LEASE_S / 2)
            await asyncio.to_thread(self.client().renew_concurrency_lease, lease.id, LEASE_S)

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        lease = await self._acquire(name)
        renew = asyncio.create_task(self._renew(lease))
        try:
            yield
        finally:
            renew.cancel()
            with self._lock:
                keep = (self._waiting.get(name, 0) > 0
                        and time.monotonic() - lease.since < self.keep_s)
                if keep:
                    self._idle.setdefault(name, []).append(lease)
            if not keep:
                await self._release(lease)
            else:  # the waiter may have been served by the server meanwhile
                await self._release_unwanted(name)

    async def take(self, name: str, amount: int) -> None:
        while True:
            try:
                await asyncio.to_thread(self.client().increment_concurrency_slots,
                                        names=[name], slots=amount, mode="rate_limit")
                return
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code != 423:
                    raise
                # A rate limit's Retry-After is when enough slots will have decayed.
                wait = float(exc.response.headers.get("Retry-After") or self.poll_s)
                await asyncio.sleep(max(wait, HANDOFF_POLL_S))


def prefect_limiters(prefix: str = DEFAULT_PREFIX) -> LimiterFactory:
    """A shard gateway's ``limits``: every entry's limits drawn from the Prefect server."""
    return shared_limiters(PrefectSlots(), prefix)


def publish_limits(specs: Iterable[ModelSpec], prefix: str = DEFAULT_PREFIX
                   ) -> list[SharedLimit]:
    """Create or update the GCLs of ``specs``' limits; returns them."""
    limits = [x for spec in specs for x in model_limits(spec, prefix).all()]
    with get_client(sync_client=True) as client:
        for x in limits:
            client.upsert_global_concurrency_limit_by_name(
                x.name, x.limit, slot_decay_per_second=x.decay_per_s)
    return limits


def require_limits(specs: Iterable[ModelSpec], prefix: str = DEFAULT_PREFIX) -> None:
    """One line naming the shared limits missing on the Prefect server (before any call)."""
    names = [x.name for spec in specs for x in model_limits(spec, prefix).all()]
    missing = []
    with get_client(sync_client=True) as client:
        for name in names:
            try:
                client.read_global_concurrency_limit_by_name(name)
            except ObjectNotFound:
                missing.append(name)
    if missing:
        raise LimitsMissing(f"the Prefect server has no global concurrency limit "
                         f"{', '.join(missing)}: the run's parent publishes them before it "
                         "sends the shards (sharding.limits: shared)")
