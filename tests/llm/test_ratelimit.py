from __future__ import annotations

import asyncio
import time

import pytest

from essaybench.llm.ratelimit import BURST_SECONDS, EndpointLimiter, TokenBucket


def test_concurrency_is_bounded() -> None:
    limiter = EndpointLimiter(max_concurrency=3)
    active = peak = 0

    async def job() -> None:
        nonlocal active, peak
        async with limiter.slot():
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0.01)
            active -= 1

    async def main() -> None:
        await asyncio.gather(*(job() for _ in range(20)))

    asyncio.run(main())
    assert peak == 3


def test_rpm_bucket_spaces_requests_after_the_burst() -> None:
    rpm = 600  # 10 per second, burst of 10 s worth = 100
    bucket_capacity = rpm / 60 * BURST_SECONDS

    async def main() -> float:
        bucket = TokenBucket(rpm)
        t0 = time.monotonic()
        for _ in range(int(bucket_capacity) + 5):  # 5 beyond the burst need 0.5 s
            await bucket.take()
        return time.monotonic() - t0

    elapsed = asyncio.run(main())
    assert 0.4 <= elapsed <= 1.5


def test_tpm_oversized_request_does_not_deadlock() -> None:
    async def main() -> None:
        bucket = TokenBucket(60)  # capacity 10 tokens
        await asyncio.wait_for(bucket.take(10_000), timeout=1)

    asyncio.run(main())


def test_pause_holds_every_request() -> None:
    limiter = EndpointLimiter(max_concurrency=4)

    async def main() -> list[float]:
        limiter.pause(0.3)
        t0 = time.monotonic()

        async def job() -> float:
            async with limiter.slot():
                return time.monotonic() - t0

        return list(await asyncio.gather(*(job() for _ in range(4))))

    waits = asyncio.run(main())
    assert all(w >= 0.29 for w in waits)


def test_invalid_limits() -> None:
    with pytest.raises(ValueError, match="max_concurrency"):
        EndpointLimiter(0)
    with pytest.raises(ValueError, match="positive"):
        TokenBucket(0)
