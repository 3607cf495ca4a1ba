"""kill -9 in the middle of a batch: the ledger keeps every finished call, and the
rerun pays only for what was missing (at most the calls that were in flight)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server

N_CALLS = 200
CONCURRENCY = 8

CHILD = """
import asyncio, sys
sys.path.insert(0, sys.argv[4])
from essaybench.llm.gateway import Gateway
from essaybench.llm.ledger import Ledger
from essaybench.llm.retry import Backoff
from essaybench.llm.types import ChatRequest, Message
from tests.llm.conftest import fake_spec, registry_of

async def main():
    requests = [ChatRequest(model="fake", messages=(Message(role="user", content=f"题{i}"),))
                for i in range(int(sys.argv[3]))]
    # A short group-commit linger keeps the unacknowledged window (and the bound below) small.
    with Ledger(sys.argv[1], linger_s=0.05) as ledger:
        gateway = Gateway(registry_of(fake_spec(max_concurrency=int(sys.argv[5]))), ledger,
                          base_urls={"fake": sys.argv[2]}, backoff=Backoff(0.01, 0.05))
        results = await gateway.run(requests)
        await gateway.aclose()
    print("DONE", sum(r.ok for r in results), flush=True)

asyncio.run(main())
"""


def _child(ledger: Path, base_url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(ledger), base_url, str(N_CALLS), str(PROJECT_ROOT),
         str(CONCURRENCY)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=PROJECT_ROOT)


def _ok_server_keys(ledger: Path) -> set[str]:
    with duckdb.connect(str(ledger), read_only=True) as con:
        texts = con.execute("select response_text from llm_calls where status = 'ok'").fetchall()
    return {t.removeprefix("key=") for (t,) in texts}


@pytest.mark.slow
def test_kill_9_mid_batch_then_rerun(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.duckdb"
    scenario = FakeScenario.model_validate(
        {"models": {"*": {"reply": "template", "template": "key={key}", "latency_ms": 50}}})
    with run_fake_server(scenario) as server:
        child = _child(ledger, server.base_url)
        deadline = time.monotonic() + 120
        while server.stats().totals.completed < N_CALLS // 3:
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "child made no progress"
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        survived = _ok_server_keys(ledger)  # DuckDB replays its WAL on open
        assert len(survived) >= N_CALLS // 3 - 2 * CONCURRENCY

        rerun = _child(ledger, server.base_url)
        out, err = rerun.communicate(timeout=300)
        assert rerun.returncode == 0, err
        assert out.strip() == f"DONE {N_CALLS}"
        per_key = server.stats(per_key=True).per_key
    assert per_key is not None
    final = _ok_server_keys(ledger)
    assert len(final) == N_CALLS  # the ledger is complete
    # The template's {key} is a prefix of the server's full body hash.
    received = {k[:len(next(iter(survived)))]: c.received for k, c in per_key.items()}
    for key in survived:  # a call stored before the crash was never sent again
        assert received[key] == 1, key
    resent = [k for k, n in received.items() if n > 1]
    # Only calls not yet acknowledged can be re-sent: in flight over HTTP (<= CONCURRENCY),
    # waiting out the 50 ms linger or inside the commit under way when the kill came
    # (at ~160 calls/s, about CONCURRENCY each), plus margin for a slow commit.
    assert len(resent) <= 4 * CONCURRENCY
    assert not set(resent) & survived
