"""Prefect's side of ``essaybench.llm.shared_limits``: each model's limits as Prefect global
concurrency limits on the run's Prefect server, shared by every shard on every host.

- The parent publishes them (``publish_limits``, before any shard is sent): one GCL per
  entry for ``max_concurrency``, and one with ``slot_decay_per_second`` per rpm/tpm (a
  rate limit: the burst is its limit, the rate its decay). Upserted: limits belong to the
  registry entry (the provider account), so a changed entry changes them for every run.
- A shard's gateway draws from them (``PrefectSlots``): ``concurrency()`` holds a slot for
  each attempt under a lease the client renews while the attempt runs, so the slots of a
  shard whose host dies come back when the lease expires (``LEASE_S``); ``rate_limit()``
  takes rpm/tpm slots that decay.

Cost: a call acquires (one request to the server, and another each time the limit is
full: the server says when to ask again), renews its lease once on entry and releases it:
about three small requests to the Prefect server per LLM call, and none for a model
without limits but max_concurrency.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

from prefect.client.orchestration import get_client
from prefect.concurrency.asyncio import concurrency, rate_limit
from prefect.exceptions import ObjectNotFound

from essaybench.llm.ratelimit import LimiterFactory
from essaybench.llm.registry import ModelSpec
from essaybench.llm.shared_limits import DEFAULT_PREFIX, SharedLimit, model_limits, shared_limiters
from essaybench.runs.shards import ShardRefused
from essaybench.stages.shard import ShardError

# A held slot's lease: renewed every 0.75 × this while its attempt runs; the slots of a
# killed shard are free again within about this long (the server's minimum is 60 s).
LEASE_S = 60.0


class PrefectSlots:
    """``SlotService`` on the Prefect server the process is configured for
    (PREFECT_API_URL). Limits must exist (``strict``): a shard whose parent did not
    publish them fails instead of calling without limits."""

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        async with concurrency(name, occupy=1, lease_duration=LEASE_S, strict=True):
            yield

    async def take(self, name: str, amount: int) -> None:
        await rate_limit(name, occupy=amount, strict=True)


class LimitsMissing(ShardError, ShardRefused):
    """A shard's shared limits are not on the Prefect server: every attempt would fail
    alike (its flow run ends Refused, not sent again)."""


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
