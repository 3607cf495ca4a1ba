"""kill -9 in the middle of an adaptive run, resumed as a rerun: the same sample and the
same decisions as an uninterrupted run, and no call the killed run had committed is sent
again (only those in flight at the kill). Fake server counters per request key."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
import yaml

from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.server import run_fake_server
from essaybench.stages.pipeline import run_stages
from essaybench.store import Store
from essaybench.store.runs import record_run
from tests.helpers import copy_store
from tests.stages.adaptive_fixtures import config_yaml, registry_yaml, scenario

pytestmark = pytest.mark.slow
SAMPLING = {"mode": "adaptive", "round_size": 4, "floor_per_stratum": 1}

CHILD = """
import sys
sys.path.insert(0, sys.argv[3])
from essaybench.bench.config import load_benchmark_config
from essaybench.stages.pipeline import run_stages
from essaybench.store import Store
from essaybench.store.runs import record_run

store = Store(sys.argv[1])
record_run(store, "killed")
run_stages(store, "killed", load_benchmark_config(sys.argv[2]), ["generate", "judge"], None)
print("DONE", flush=True)
"""


def _models(path: Path, base_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    models = registry_yaml(base_url)
    for spec in models["models"].values():
        spec["max_concurrency"] = 2
    path.write_text(yaml.safe_dump(models), encoding="utf-8")
    monkeypatch.setenv("ESSAYBENCH_MODELS", str(path))


def test_a_killed_adaptive_run_resumes_to_the_same_sample_paying_nothing_twice(
        curated_copy: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from essaybench.bench.config import load_benchmark_config

    config = tmp_path / "benchmark.yaml"
    config.write_text(yaml.safe_dump(config_yaml(SAMPLING)), encoding="utf-8")
    bench = load_benchmark_config(config)
    clean_store = copy_store(curated_copy, tmp_path / "clean")
    with run_fake_server(scenario()) as server:
        _models(tmp_path / "clean.yaml", server.base_url, monkeypatch)
        record_run(clean_store, "clean")
        clean = run_stages(clean_store, "clean", bench, ["generate", "judge"], None)
        clean_total = server.stats().totals.received
    store = curated_copy
    with run_fake_server(scenario(latency_ms=30)) as server:
        _models(tmp_path / "models.yaml", server.base_url, monkeypatch)
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(store.root), str(config), str(PROJECT_ROOT)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=PROJECT_ROOT,
            env={**os.environ})
        deadline = time.monotonic() + 120
        while server.stats().totals.completed < 60:  # a few rounds in
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the run made no progress"
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait() == -signal.SIGKILL  # killed mid-run, not finished
        with duckdb.connect(str(store.root / "ledger.duckdb"), read_only=True) as con:
            paid = {k for (k,) in con.execute(
                "select key from llm_calls where run_id = 'killed' and status = 'ok'"
            ).fetchall()}
        assert paid
        received_before = server.stats().totals.received
        assert received_before < clean_total / 2
        record_run(store, "resumed", base_run="killed", from_stage="generate")
        resumed = run_stages(store, "resumed", bench, ["generate", "judge"], None)
        per_key = server.stats(per_key=True).per_key
        total = server.stats().totals.received
    assert per_key is not None
    assert max(c.received for c in per_key.values()) <= 2
    twice = sum(1 for c in per_key.values() if c.received == 2)
    assert twice == received_before - len(paid)  # only what was in flight is sent again
    assert total == clean_total + twice
    assert resumed["adaptive"].meta["sampled_prompts"] == \
        clean["adaptive"].meta["sampled_prompts"]
    assert resumed["adaptive"].read().equals(clean["adaptive"].read())
