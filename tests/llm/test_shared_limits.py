"""Limits shared by several gateways (a sharded run's shards): their sum stays within the
entry's limits, and one busy gateway uses what idle ones leave."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.llm.gateway import Gateway
from essaybench.llm.ledger import Ledger
from essaybench.llm.ratelimit import BURST_SECONDS
from essaybench.llm.retry import Backoff
from essaybench.llm.shared_limits import (
    LocalSlots,
    SharedLimit,
    limit_name,
    model_limits,
    shared_limiters,
)
from essaybench.llm.types import ChatRequest, Message
from tests.llm.conftest import fake_spec, registry_of

FAST = Backoff(base_s=0.01, cap_s=0.05)


def test_an_entrys_limits_as_named_shared_limits() -> None:
    limits = model_limits(fake_spec("qwen2.5", max_concurrency=5, rpm=600, tpm=90_000),
                          "eb")
    assert limits.concurrency == SharedLimit("eb-qwen2.5-concurrency", 5, 0.0)
    # The in-process buckets' rate and ten-second burst (llm.ratelimit).
    assert limits.requests == SharedLimit("eb-qwen2.5-rpm", int(10 * BURST_SECONDS), 10.0)
    assert limits.tokens == SharedLimit("eb-qwen2.5-tpm", int(1500 * BURST_SECONDS), 1500.0)
    assert model_limits(fake_spec(rpm=1)).requests == SharedLimit(
        limit_name("essaybench", "fake", "rpm"), 1, 1 / 60)  # at least one slot
    assert model_limits(fake_spec()).all() == [model_limits(fake_spec()).concurrency]


def test_a_rate_limit_is_a_bucket_with_the_entrys_burst() -> None:
    now = [0.0]
    slots = LocalSlots([SharedLimit("r", 10, 2.0)], clock=lambda: now[0])
    assert slots._try_take("r", 10) == 0.0  # the whole burst at once
    assert slots._try_take("r", 1) == pytest.approx(0.5)  # then the rate: 2 per second
    now[0] = 1.0
    assert slots._try_take("r", 2) == 0.0
    assert slots._try_take("r", 1) == pytest.approx(0.5)


def _requests(shard: int, n: int) -> list[ChatRequest]:
    return [ChatRequest(model="fake", stage="generate", tag=f"s{shard}p{i}",
                        messages=(Message(role="user", content=f"第{shard}组第{i}题"),))
            for i in range(n)]


def _shards(server: FakeServerHandle, tmp_path: Path, slots: LocalSlots,
            sizes: list[int]) -> None:
    """One gateway per shard, each in a thread and event loop of its own (as shards are
    processes of their own), all drawing from ``slots``."""
    spec = fake_spec(max_concurrency=3)
    errors: list[BaseException] = []

    def shard(k: int) -> None:
        async def main() -> None:
            with Ledger(tmp_path / f"ledger-{k}.duckdb") as ledger:
                gateway = Gateway(registry_of(spec), ledger, backoff=FAST, seed=0,
                                  base_urls={"fake": server.base_url},
                                  limits=shared_limiters(slots))
                results = await gateway.run(_requests(k, sizes[k]))
                assert all(r.ok for r in results)
        try:
            asyncio.run(main())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=shard, args=(k,)) for k in range(len(sizes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def test_shards_share_one_concurrency_limit_and_a_lone_shard_uses_all_of_it(
        tmp_path: Path) -> None:
    name = limit_name("essaybench", "fake", "concurrency")
    scenario = FakeScenario.model_validate({"models": {"gpt-x": {"latency_ms": 40}}})
    with run_fake_server(scenario) as server:
        together = LocalSlots.for_specs([fake_spec(max_concurrency=3)])
        _shards(server, tmp_path / "a", together, [9, 9])
        alone = LocalSlots.for_specs([fake_spec(max_concurrency=3)])
        _shards(server, tmp_path / "b", alone, [12, 0])  # the other shard has nothing left
        received = server.stats().totals.received
    assert received == 30
    # Both shards at once never held more than the entry's 3 (each alone may take 3) ...
    assert together.peak[name] == 3
    # ... and a shard on its own took all 3, where a split would have left it 3 // 2 = 1.
    assert alone.peak[name] == 3
