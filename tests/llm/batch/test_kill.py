"""kill -9 during submission and during polling, then the same requests in a new process:
the open batch is found and polled (or adopted, when the kill came between its creation
and its record), nothing is submitted twice, and every call has exactly one result."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from essaybench.llm.batch import BatchOptions
from essaybench.llm.ledger import Ledger
from essaybench.llm.types import CallStatus
from tests.llm.batch.conftest import requests, run_batch

ROOT = Path(__file__).resolve().parents[3]
N = 6


def run_until_killed(url: str, ledger: Path, protocol: str, step: str) -> list[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.llm.batch.batch_worker", str(ledger), url, protocol,
         str(N), step], cwd=ROOT, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 60
    try:
        for line in proc.stdout:
            seen.append(line.strip())
            if line.strip() == "STOPPED" or time.monotonic() > deadline:
                break
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # kill -9: no cleanup of any kind
        proc.wait()
    assert seen[-1] == "STOPPED", seen
    return seen


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
@pytest.mark.parametrize("step", ["intent", "created", "recorded", "polled"])
def test_killed_run_resumes_without_submitting_twice(
        serve: Any, tmp_path: Path, protocol: str, step: str) -> None:
    fake = serve({"delay_s": 0.5, "per_item_s": 0.02})
    path = tmp_path / "ledger.duckdb"
    run_until_killed(fake.base_url, path, protocol, step)

    got = run_batch(fake, path, requests(N), batch=protocol)  # a new process's run
    assert all(r.status is CallStatus.OK and not r.from_ledger for r in got)
    b = fake.stats().batch
    assert b is not None
    assert b.batches_created == 1  # killed before creating: created once by the resume
    assert b.batches_per_custom_id == {"1": N} and b.received_per_key == {"1": N}
    assert fake.stats().totals.received == 0
    with Ledger(path) as ledger:
        calls = ledger.query("SELECT key, count(*) AS n FROM llm_calls GROUP BY key")
        batches = ledger.query("SELECT state, error FROM llm_batches ORDER BY created_at")
    assert len(calls) == N and all(c["n"] == 1 for c in calls)  # one result per call
    expected = ([("failed", "never created"), ("collected", None)] if step == "intent"
                else [("collected", None)])
    assert [(r["state"], r["error"]) for r in batches] == expected


def test_another_run_makes_its_own_batch_and_the_killed_run_still_resumes(
        serve: Any, tmp_path: Path) -> None:
    fake = serve({"delay_s": 0.5, "per_item_s": 0.02})
    path = tmp_path / "ledger.duckdb"
    run_until_killed(fake.base_url, path, "openai", "polled")  # run-1, left open
    other = run_batch(fake, path, requests(N), run_id="run-2")  # a new run: fresh calls
    assert all(r.ok and not r.from_ledger for r in other)
    mine = run_batch(fake, path, requests(N))  # run-1 again: its own open batch
    assert all(r.ok and not r.from_ledger for r in mine)
    b = fake.stats().batch
    assert b is not None and b.batches_created == 2
    assert b.batches_per_custom_id == {"2": N}  # one batch per run, never a third


def test_max_resubmits_counts_the_batches_of_earlier_processes(
        serve: Any, tmp_path: Path) -> None:
    # A window that answers nothing: every batch expires. Killed while polling the first
    # one; the resumed run may resubmit once (max_resubmits=1), then fails the calls.
    fake = serve({"delay_s": 0.5, "window_s": 0.4})
    path = tmp_path / "ledger.duckdb"
    run_until_killed(fake.base_url, path, "openai", "polled")
    got = run_batch(fake, path, requests(N), BatchOptions(
        max_resubmits=1, poll_initial_s=0.05, poll_max_s=0.2))
    assert all(r.status is CallStatus.API_ERROR and r.error_kind == "batch_expired"
               for r in got)
    b = fake.stats().batch
    assert b is not None and b.batches_created == 2 and b.batches_per_custom_id == {"2": N}
