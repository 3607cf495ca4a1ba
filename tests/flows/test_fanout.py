"""When the pipeline takes a running shard for dead (``flows._fanout._stale``): its own
heartbeat older than ``stale_after_s``, or none at all ``startup_grace_s`` after it started."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from essaybench.bench.sharding import ShardingParams
from essaybench.flows._fanout import _stale

NOW = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
PARAMS = ShardingParams(shards=4, stale_after_s=30, startup_grace_s=120, liveness="parts")


def beat(seconds_ago: float) -> dict[str, str]:
    return {"at": (NOW - timedelta(seconds=seconds_ago)).isoformat()}


def test_a_fresh_heartbeat_is_alive_and_an_old_one_dead() -> None:
    started = NOW - timedelta(seconds=600)
    assert _stale(beat(5), started, NOW, PARAMS) is None
    assert _stale(beat(31), started, NOW, PARAMS) == "no heartbeat for 31 s"


def test_without_a_heartbeat_the_start_gets_a_grace() -> None:
    assert _stale(None, NOW - timedelta(seconds=100), NOW, PARAMS) is None
    assert _stale({}, NOW - timedelta(seconds=121), NOW, PARAMS) == (
        "no heartbeat 121 s after it started")
    assert _stale(None, None, NOW, PARAMS) is None  # no start recorded: wait
