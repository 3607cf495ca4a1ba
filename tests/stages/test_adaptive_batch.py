"""Adaptive sampling with the writers and the judge on a provider batch API (issue 26: batch
mode and adaptive sampling together), on the fake server (tests/stages/adaptive_fixtures.py:
the judge scores the three writers by fixed, far-apart patterns) answering both batch
protocols (the writers on OpenAI's, the judge on OpenAI's or Anthropic's). The batched run
does not wait in its process (``batch_waiting="return"``): it is entered again after each
``BatchesPending`` until done, as the scheduled flow resumes it.

It ends as the same config with direct calls (same server, same seed): the same decisions,
sample, essays and scores; each call submitted in exactly one batch, answered once, as many
paid calls as the direct run's, and no prompt outside the sample ever written. A process
killed between rounds while its batch is open, then entered again from scratch on the same
store, adopts that batch: nothing is submitted twice and the decisions are the same."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
import yaml

from essaybench.bench.config import BenchmarkConfig, load_benchmark_config
from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.batch.route import BatchesPending
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.llm.registry import ModelSpec, Registry
from essaybench.stages.pipeline import run_stages
from essaybench.store import Snapshot, Store
from essaybench.store.runs import record_run
from tests.helpers import copy_store
from tests.stages.adaptive_fixtures import MARKS, config_yaml, registry_yaml, scenario

pytestmark = pytest.mark.slow
SAMPLING = {"mode": "adaptive", "round_size": 12, "floor_per_stratum": 1}
FAST = {"poll_initial_s": 0.02, "poll_max_s": 0.05}  # the batch options: polls a moment apart
WRITERS = list(MARKS)
VOLATILE = ("latency_s", "started_at", "finished_at", "generated_at", "judged_at",
            "from_ledger", "cost_usd", "batched")
STAGES = ["generate", "judge", "aggregate"]


def _config() -> dict[str, Any]:
    return {**config_yaml(SAMPLING), "batch": FAST}


def _models(base_url: str, batch: dict[str, str]) -> dict[str, Any]:
    """The fixtures' registry, each entry with its batch protocol (default none) and a
    max_tokens (Anthropic's batches need one; the direct run has it too: same keys)."""
    models = registry_yaml(base_url)
    for name, spec in models["models"].items():
        spec.update(batch=batch.get(name, "none"), batch_price_factor=0.5,
                    default_params={"max_tokens": 4096})
    return models


def _registry(base_url: str, batch: dict[str, str]) -> Registry:
    return Registry(models={name: ModelSpec(name=name, **spec) for name, spec
                            in _models(base_url, batch)["models"].items()})


def _scenario(**batch: Any) -> FakeScenario:
    return FakeScenario.model_validate({**scenario().model_dump(), "batch": batch})


def _stable(snapshot: Snapshot) -> pl.DataFrame:
    table = snapshot.read()
    return table.drop([c for c in table.columns if c in VOLATILE]).sort(
        [c for c in ("model", "prompt_id", "judge", "first", "second")
         if c in table.columns])


def _same(a: dict[str, Snapshot], b: dict[str, Snapshot], ignore: tuple[str, ...] = ()) -> None:
    """The same sample, rounds and tables (but ``ignore``'s columns)."""
    assert a["adaptive"].meta["sampled_prompts"] == b["adaptive"].meta["sampled_prompts"]
    assert a["adaptive"].meta["rounds"] == b["adaptive"].meta["rounds"]
    for stage in ("adaptive", "generate", "judge", "aggregate"):
        x, y = (_stable(s[stage]).drop(ignore, strict=False) for s in (a, b))
        assert x.columns == y.columns, stage
        diff = [c for c in x.columns if not x[c].equals(y[c])]
        assert not diff, (stage, diff, x.select(diff).rows()[:4], y.select(diff).rows()[:4])


def _ledger(store: Store) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The run's calls and the keys of its batches' items (one row per item)."""
    with duckdb.connect(str(store.root / "ledger.duckdb"), read_only=True) as con:
        calls: pl.DataFrame = con.sql(
            "SELECT key, model, stage, tag, status, batched, attempts, run_id, cost_usd "
            "FROM llm_calls ORDER BY key").pl()
        items: pl.DataFrame = con.sql(
            "SELECT i.key, b.state, b.model, b.provider FROM llm_batch_items i "
            "JOIN llm_batches b USING (submission_id)").pl()
        return calls, items


def _until_done(store: Store, run_id: str, config: BenchmarkConfig, registry: Registry,
                seconds: float = 60) -> tuple[dict[str, Snapshot], int]:
    """Enter the run again after each BatchesPending (a fresh session, sampler and loop
    each time, as a resumed flow run): its snapshots and how many entries it took."""
    deadline = time.monotonic() + seconds
    entries = 0
    while True:
        entries += 1
        try:
            return run_stages(store, run_id, config, STAGES, None, registry=registry,
                              batch_waiting="return"), entries
        except BatchesPending:
            assert time.monotonic() < deadline, f"still pending after {entries} entries"
            time.sleep(0.02)


@dataclass(frozen=True)
class Reference:
    """The same config with every call direct, on the module's server."""

    snapshots: dict[str, Snapshot]
    paid: dict[str, int]  # calls the server received, per model
    cost_usd: float  # what the ledger says they cost


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServerHandle]:
    """One server for the module (a call's key hashes its URL); every batch answers
    nothing before its status was read once, so each batch makes the run wait once."""
    with run_fake_server(_scenario(in_progress_polls=1)) as server:
        yield server


@pytest.fixture(scope="module")
def direct(curated: Store, fake: FakeServerHandle,
           tmp_path_factory: pytest.TempPathFactory) -> Reference:
    store = copy_store(curated, tmp_path_factory.mktemp("adaptive-direct") / "store")
    fake.reset()
    record_run(store, "r1")
    snaps = run_stages(store, "r1", BenchmarkConfig.model_validate(_config()), STAGES, None,
                       registry=_registry(fake.base_url, {}))
    paid = {m: c.received for m, c in fake.stats().per_model.items()}
    with duckdb.connect(str(store.root / "ledger.duckdb"), read_only=True) as con:
        cost = con.execute("SELECT sum(cost_usd) FROM llm_calls").fetchone()
    assert cost is not None
    return Reference(snaps, paid, float(cost[0]))


def _paid_once(store: Store, fake: FakeServerHandle, direct: Reference,
               protocols: dict[str, str]) -> pl.DataFrame:
    """Every call went through a batch (none direct), each ledger key in one batch line,
    each body answered once; as many calls per model as the direct run paid. The calls."""
    stats = fake.stats(per_key=True)
    calls, items = _ledger(store)
    batch = stats.batch
    assert batch is not None
    assert stats.totals.received == 0
    assert calls["key"].n_unique() == calls.height
    assert calls["batched"].fill_null(False).all() and set(calls["status"]) == {"ok"}
    assert set(calls["run_id"]) == {"r1"} and (calls["attempts"] == 1).all()
    assert items["key"].n_unique() == items.height  # each key in one submission
    assert set(items["key"]) == set(calls["key"]) and set(items["state"]) == {"collected"}
    assert dict(items.select("model", "provider").unique().iter_rows()) == protocols
    assert batch.batches_per_custom_id == {"1": calls.height}
    assert batch.per_custom_id is not None and set(batch.per_custom_id) == set(calls["key"])
    assert batch.received_per_key == {"1": calls.height}
    assert batch.lines_received == calls.height
    assert batch.by_kind == {"succeeded": calls.height}
    assert batch.batches_created == _submissions(store)
    assert {m: c["received"] for m, c in batch.per_model.items()} == direct.paid
    assert calls.height == sum(direct.paid.values())
    return calls


# Every entry on OpenAI's Batch API here; the killed run below has its judge and one writer
# on Anthropic's Message Batches (a writer's seeded request goes without its seed there:
# the Messages API has none; the seed stays in the call's key).
OPENAI = dict.fromkeys([*WRITERS, "judge"], "openai")
MIXED = {**OPENAI, WRITERS[0]: "anthropic", "judge": "anthropic"}


def test_adaptive_run_in_batch_mode_ends_as_direct_calls_paying_each_once(
        curated: Store, fake: FakeServerHandle, direct: Reference, tmp_path: Path) -> None:
    config = BenchmarkConfig.model_validate(_config())
    store = copy_store(curated, tmp_path / "batch")
    fake.reset()
    record_run(store, "r1")
    batched, entries = _until_done(store, "r1", config, _registry(fake.base_url, OPENAI))
    _same(batched, direct.snapshots)
    meta = batched["adaptive"].meta
    sampled = list(meta["sampled_prompts"])
    assert meta["stop"] == "all_decided" and len(meta["rounds"]) >= 2
    assert sampled and len(sampled) < meta["of"]  # it stopped early, as the direct run did
    assert set(batched["adaptive"].read()["outcome"]) == {"first_better"}
    # Each round waited for its writers' batches, then for its judge's (an open-genre
    # prompt's genre call, then its judgment, once more): never all at once.
    assert entries >= 2 * len(meta["rounds"]) + 1
    statuses = [r.status for r in store.stage_runs("r1", 1000)]
    assert statuses.count("waiting") == entries - 1 and "failed" not in statuses
    calls = _paid_once(store, fake, direct, OPENAI)
    # Writers are called for the sampled prompts only, once each.
    written = calls.filter(pl.col("stage") == "generate")
    assert dict(written.group_by("model").len().iter_rows()) == dict.fromkeys(
        WRITERS, len(sampled))
    assert {str(t).split("#")[0] for t in written["tag"]} == set(sampled)
    # at the batch price: half of what the direct run paid
    assert float(calls["cost_usd"].sum()) == pytest.approx(direct.cost_usd * 0.5)


def _submissions(store: Store) -> int:
    with duckdb.connect(str(store.root / "ledger.duckdb"), read_only=True) as con:
        row = con.execute("SELECT count(*) FROM llm_batches").fetchone()
        assert row is not None
        return int(row[0])


# A process of the plain CLI (polling in the process) that dies by kill -9 once its
# KILL_AT-th batch is recorded open: the first round's three writer batches and judge
# batch are collected, the second round's first writer batch is open.
KILL_AT = 5
CHILD = """
import os, signal, sys
sys.path.insert(0, sys.argv[3])
from essaybench.bench.config import load_benchmark_config
from essaybench.llm.batch.runner import BatchRunner
from essaybench.stages.pipeline import run_stages
from essaybench.store import Store
from essaybench.store.runs import record_run

recorded = 0
def on_step(step):
    global recorded
    if step == "recorded":
        recorded += 1
        if recorded == int(sys.argv[4]):
            os.kill(os.getpid(), signal.SIGKILL)

init = BatchRunner.__init__
def dying(self, gateway, options=None, **kw):
    init(self, gateway, options, **{**kw, "on_step": on_step})
BatchRunner.__init__ = dying

store = Store(sys.argv[1])
record_run(store, "r1")
run_stages(store, "r1", load_benchmark_config(sys.argv[2]), ["generate", "judge", "aggregate"],
           None)
print("DONE", flush=True)
"""


def test_a_process_killed_between_rounds_resubmits_nothing_and_decides_the_same(
        curated: Store, fake: FakeServerHandle, direct: Reference, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    config_path = tmp_path / "benchmark.yaml"
    config_path.write_text(yaml.safe_dump(_config()), encoding="utf-8")
    config = load_benchmark_config(config_path)
    store = copy_store(curated, tmp_path / "killed")
    models = tmp_path / "models.yaml"
    models.write_text(yaml.safe_dump(_models(fake.base_url, MIXED)), encoding="utf-8")
    monkeypatch.setenv("ESSAYBENCH_MODELS", str(models))
    fake.reset()
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(store.root), str(config_path), str(PROJECT_ROOT),
         str(KILL_AT)], capture_output=True, text=True, cwd=PROJECT_ROOT,
        env={**os.environ}, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]  # killed, not done
    killed = fake.stats().batch
    assert killed is not None and killed.batches_created == KILL_AT
    _, items = _ledger(store)
    states = dict(items.group_by("state").agg(pl.col("model").unique().sort()).rows())
    assert states == {"collected": sorted([*WRITERS, "judge"]), "open": [WRITERS[0]]}
    # Entered again from scratch (a new process's session, sampler and loop), not waiting
    # in the process: the open batch is adopted, the first round served from the ledger.
    resumed, _ = _until_done(store, "r1", config, _registry(fake.base_url, MIXED))
    # Anthropic reports cache reads always (0 here); the OpenAI-style replies leave them out
    _same(resumed, direct.snapshots, ignore=("cached_input_tokens",))
    _paid_once(store, fake, direct, MIXED)  # the open batch was adopted, not made again



# Some of the judge's calls fail (HTTP 400: an api_error, not retried).
JUDGE_FAULTS = [{"kind": "status", "status": 400, "rate": 0.1, "seed": 3, "models": ["judge"]}]


def _failed(store: Store) -> int:
    with duckdb.connect(str(store.root / "ledger.duckdb"), read_only=True) as con:
        row = con.execute("SELECT count(*) FROM llm_calls WHERE status != 'ok'").fetchone()
        assert row is not None
        return int(row[0])


def test_a_failed_direct_call_is_attempted_once_across_rounds_and_entries(
        curated: Store, tmp_path: Path) -> None:
    """The writers batched, the judge direct, some of its calls failing. Within a run a
    failed call stays a failure: the direct run asks its first round twice (the baseline
    probe, then the loop), the batched run replays its rounds at every entry, and the
    judge calls are follow-ups of essays served from the ledger — none is sent again
    (they were: five failed judge calls twice and one three times in the batched run,
    two twice in the direct run, and the decisions moved)."""
    config = BenchmarkConfig.model_validate(_config())
    faulty = FakeScenario.model_validate({**scenario().model_dump(), "faults": JUDGE_FAULTS,
                                          "batch": {"in_progress_polls": 1}})
    direct_store = copy_store(curated, tmp_path / "direct")
    store = copy_store(curated, tmp_path / "batch")
    with run_fake_server(faulty) as server:
        record_run(direct_store, "r1")
        direct = run_stages(direct_store, "r1", config, STAGES, None,
                            registry=_registry(server.base_url, {}))
        direct_stats = server.stats()
        server.reset()
        record_run(store, "r1")
        batched, entries = _until_done(store, "r1", config,
                                       _registry(server.base_url,
                                                 dict.fromkeys(WRITERS, "openai")))
        stats = server.stats()
    failed = _failed(direct_store)
    assert failed > 0 and _failed(store) == failed
    assert direct_stats.received_per_key == {"1": direct_stats.totals.received}
    _same(batched, direct)
    assert entries > len(batched["adaptive"].meta["rounds"])  # each round's writers waited
    paid = direct_stats.per_model["judge"].received
    assert {m: c.received for m, c in stats.per_model.items()} == {"judge": paid}
    assert stats.received_per_key == {"1": paid}
    assert stats.batch is not None
    assert stats.batch.batches_per_custom_id == {"1": 3 * len(
        batched["adaptive"].meta["sampled_prompts"])}
