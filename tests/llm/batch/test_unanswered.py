"""Lines a batch did not answer: partial failure, expiry, cancellation, a batch failed as a
whole; each by the on_expired policy (resubmit | direct | fail)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from essaybench.llm.batch import BatchOptions, BatchRunner, Pending
from essaybench.llm.ledger import Ledger
from essaybench.llm.types import CallStatus
from tests.llm.batch.conftest import gateway, requests, run_batch


def keys_of(fake: Any, tmp_path: Path, reqs: list[Any]) -> list[str]:
    with Ledger(tmp_path / "keys.duckdb") as ledger:
        gw = gateway(fake, ledger)
        return [gw.prepare(r).key for r in reqs]


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_partial_failure_fails_the_permanent_errors_and_sends_the_transient_ones_direct(
        serve: Any, tmp_path: Path, protocol: str) -> None:
    probe = serve()
    reqs = requests(6)
    keys = keys_of(probe, tmp_path, reqs)
    # keys[2], keys[3]: a 500 (transient: sent again, here directly)
    fake = serve({"per_item_s": 0.005, "fail": {"custom_ids": [keys[2], keys[3]],
                                                 "status": 500}})
    got = run_batch(fake, tmp_path / "l.duckdb", reqs, BatchOptions(
        on_expired="direct", poll_initial_s=0.02, poll_max_s=0.1), batch=protocol)
    assert [r.status for r in got] == [CallStatus.OK] * 6
    stats = fake.stats(per_key=True)
    assert stats.totals.received == 2  # the two transient failures, sent direct once each
    assert stats.batch is not None and stats.batch.batches_created == 1
    assert stats.batch.by_kind == {"errored": 2, "succeeded": 4}
    assert [r.attempts for r in got] == [1, 1, 1, 1, 1, 1]
    # with fail, the same lines are api_error with the line's status, never a default
    fake2 = serve({"per_item_s": 0.005, "fail": {"custom_ids": [keys[2]], "status": 400}})
    got = run_batch(fake2, tmp_path / "l2.duckdb", reqs, BatchOptions(
        on_expired="fail", poll_initial_s=0.02, poll_max_s=0.1), batch=protocol)
    assert [r.status for r in got] == [CallStatus.OK] * 2 + [CallStatus.API_ERROR] + [
        CallStatus.OK] * 3
    assert got[2].error_kind == "http_400" and got[2].cost_usd is None


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_expired_lines_are_resubmitted_in_a_new_batch_never_answered_twice(
        serve: Any, tmp_path: Path, protocol: str) -> None:
    # 6 lines, one every 0.1 s, window 0.35 s: 3 answered, 3 expire; the next batch of 3
    # fits the window.
    fake = serve({"per_item_s": 0.1, "window_s": 0.35})
    got = run_batch(fake, tmp_path / "l.duckdb", requests(6), batch=protocol)
    assert all(r.status is CallStatus.OK for r in got)
    b = fake.stats().batch
    assert b is not None and b.batches_created == 2 and b.by_end == {"completed": 1,
                                                                     "expired": 1}
    assert b.batches_per_custom_id == {"1": 3, "2": 3}
    assert b.received_per_key == {"1": 6}  # each body reached the model once


def test_expired_lines_fail_when_told_and_after_max_resubmits(
        serve: Any, tmp_path: Path) -> None:
    fake = serve({"per_item_s": 0.1, "window_s": 0.25})  # 2 answered per batch
    got = run_batch(fake, tmp_path / "l.duckdb", requests(4), BatchOptions(
        on_expired="fail", poll_initial_s=0.02, poll_max_s=0.1))
    assert [r.status.value for r in got] == ["ok", "ok", "api_error", "api_error"]
    assert got[3].error_kind == "batch_expired"
    # resubmit at most once: 6 calls -> 2 ok, 4 again -> 2 ok, 2 fail
    got = run_batch(fake, tmp_path / "l2.duckdb", requests(6, prefix="再写"), BatchOptions(
        max_resubmits=1, poll_initial_s=0.02, poll_max_s=0.1))
    assert [r.status.value for r in got] == ["ok"] * 4 + ["api_error"] * 2


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_batch_the_provider_cancels_or_fails_is_resubmitted(
        serve: Any, tmp_path: Path, protocol: str) -> None:
    fake = serve({"per_item_s": 0.02, "cancel_after_items": 3, "fail_first_batches": 1})
    got = run_batch(fake, tmp_path / "l.duckdb", requests(5), batch=protocol)
    assert all(r.status is CallStatus.OK for r in got)
    b = fake.stats().batch
    # 3 answered, then cancelled; the 2 left fit in the next batch
    assert b is not None and b.provider_cancels == 1 and b.received_per_key == {"1": 5}
    assert b.batches_per_custom_id == {"1": 3, "2": 2}
    # openai: the first batch is created and fails; anthropic: its create answers 429
    assert b.batches_created == (3 if protocol == "openai" else 2)


def test_our_cancel_keeps_what_was_answered(serve: Any, tmp_path: Path) -> None:
    fake = serve({"per_item_s": 0.2})

    async def go(runner: BatchRunner) -> list[Any]:
        ticket = await runner.submit(requests(8))
        assert isinstance(await runner.collect(ticket), Pending)
        await asyncio.sleep(0.5)  # about 2 of the 8 lines answered (one every 0.2 s)
        await runner.cancel(ticket)
        return await runner.run(ticket.requests)  # the same requests: found, not resent

    with Ledger(tmp_path / "l.duckdb", linger_s=0) as ledger:
        runner = BatchRunner(gateway(fake, ledger), BatchOptions(
            on_expired="fail", poll_initial_s=0.02, poll_max_s=0.1))
        got = asyncio.run(go(runner))
    statuses = [r.status.value for r in got]
    assert 1 <= statuses.count("ok") < 8 and statuses.count("ok") + statuses.count(
        "api_error") == 8
    assert statuses == sorted(statuses, key=lambda s: s != "ok")  # answered in input order
    assert {r.error_kind for r in got if not r.ok} == {"batch_cancelled"}
    b = fake.stats().batch
    assert b is not None and b.cancels == 1 and b.batches_created == 1
