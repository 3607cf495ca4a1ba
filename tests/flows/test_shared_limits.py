"""Each model's limits as Prefect global concurrency and rate limits, shared by every shard
(``essaybench.tasks.limits``), on a real Prefect server: the sum of the shards stays
within the entry's limits and a lone shard uses all of them."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from uuid import uuid4

import pytest
from prefect.client.orchestration import get_client

from essaybench.llm.shared_limits import SharedLimiter, model_limits, shared_limiters
from essaybench.tasks.limits import (
    LimitsMissing,
    PrefectSlots,
    publish_limits,
    require_limits,
)
from tests.llm.conftest import fake_spec


@pytest.fixture
def prefix(prefect_engine: None) -> Iterator[str]:
    """A prefix of this test's own: its limits are removed afterwards."""
    name = f"t{uuid4().hex[:8]}"
    yield name
    with get_client(sync_client=True) as client:
        for limit in client.read_global_concurrency_limits(limit=200):
            if limit.name.startswith(name):
                client.delete_global_concurrency_limit_by_name(limit.name)


def test_the_parent_publishes_each_entrys_limits(prefix: str) -> None:
    spec = fake_spec("writer", max_concurrency=5, rpm=600, tpm=60_000)
    published = publish_limits([spec], prefix)
    assert published == model_limits(spec, prefix).all()
    with get_client(sync_client=True) as client:
        stored = {x.name: (x.limit, x.slot_decay_per_second)
                  for x in (client.read_global_concurrency_limit_by_name(p.name)
                            for p in published)}
    assert stored == {f"{prefix}-writer-concurrency": (5, 0.0),
                      f"{prefix}-writer-rpm": (100, 10.0),
                      f"{prefix}-writer-tpm": (10_000, 1000.0)}
    publish_limits([fake_spec("writer", max_concurrency=2)], prefix)  # the entry changed
    with get_client(sync_client=True) as client:
        assert client.read_global_concurrency_limit_by_name(
            f"{prefix}-writer-concurrency").limit == 2


def test_a_shard_refuses_limits_nobody_published(prefix: str) -> None:
    publish_limits([fake_spec("writer")], prefix)
    require_limits([fake_spec("writer")], prefix)
    with pytest.raises(LimitsMissing, match=rf"{prefix}-judge-concurrency, {prefix}-judge-rpm"):
        require_limits([fake_spec("writer"), fake_spec("judge", rpm=60)], prefix)


def _held_at_once(slots: PrefectSlots, prefix: str, jobs: list[int], limit: int) -> int:
    """Shards (threads with event loops of their own, as shard processes have) each
    running ``jobs[k]`` attempts through its own limiter of the entry ``writer``
    (``max_concurrency`` ``limit``); the most attempts inside a slot at once, over every
    shard. An attempt keeps its slot until ``limit`` are held (at most 20 s: a limiter
    letting fewer through shows as a peak below ``limit``, not as a slow test)."""
    factory = shared_limiters(slots, prefix)
    lock = threading.Lock()
    active = [0, 0]  # now, peak
    full = threading.Event()
    errors: list[BaseException] = []

    async def attempt(limiter: SharedLimiter) -> None:
        async with limiter.slot():
            with lock:
                active[0] += 1
                active[1] = max(active[1], active[0])
                if active[0] >= limit:
                    full.set()
            await asyncio.to_thread(full.wait, 20)
            with lock:
                active[0] -= 1

    def shard(n: int) -> None:
        limiter = factory(fake_spec("writer", max_concurrency=limit))
        assert isinstance(limiter, SharedLimiter)

        async def main() -> None:
            await asyncio.gather(*(attempt(limiter) for _ in range(n)))
        try:
            asyncio.run(main())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=shard, args=(n,)) for n in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
    return active[1]


def test_shards_hold_at_most_the_entrys_concurrency_and_one_alone_holds_all(
        prefix: str) -> None:
    publish_limits([fake_spec("writer", max_concurrency=2)], prefix)
    # Two shards with 3 attempts between them could hold 3 slots; the server lets 2 through.
    slots = PrefectSlots()  # one client for the process, as a shard has
    assert _held_at_once(slots, prefix, [2, 1], 2) == 2
    # A shard whose siblings are done holds both (a split would have given it 1).
    assert _held_at_once(slots, prefix, [2], 2) == 2
    slots.close()
    with get_client(sync_client=True) as client:  # every lease released
        assert client.read_global_concurrency_limit_by_name(
            f"{prefix}-writer-concurrency").active_slots == 0


def test_an_attempt_larger_than_the_token_burst_takes_the_burst(prefix: str) -> None:
    spec = fake_spec("writer", rpm=60, tpm=60)  # bursts of 10 requests and 10 tokens
    publish_limits([spec], prefix)
    slots = PrefectSlots()
    limiter = SharedLimiter(model_limits(spec, prefix), slots)

    async def main() -> None:
        async with limiter.slot(estimated_tokens=10**6):  # the server refuses > limit
            pass

    asyncio.run(asyncio.wait_for(main(), 30))
    slots.close()
    with get_client(sync_client=True) as client:
        tokens = client.read_global_concurrency_limit_by_name(f"{prefix}-writer-tpm")
        requests = client.read_global_concurrency_limit_by_name(f"{prefix}-writer-rpm")
    # The whole burst (10 tokens, decaying at 1 a second since), not a refusal (> limit).
    assert 5 <= tokens.active_slots <= 10
    assert requests.active_slots <= 1
