"""Batch mode in the real stages: generate + judge with a batched writer, a direct writer and a
batched judge end exactly as the same run with every call direct (essays, judgments, nonce
checks, re-asks after a reply that broke the answer format), at the batch price for the
batched entries, with no batched entry's call sent direct except the re-asks; and a run that
does not wait (``batch_waiting="return"``) is entered again until done, submitting nothing
twice."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.llm.batch import BatchOptions
from essaybench.llm.batch.route import BatchesPending
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.llm.registry import Registry
from essaybench.stages.pipeline import run_stages
from essaybench.store import Snapshot, Store
from essaybench.store.runs import record_run
from tests.helpers import copy_store
from tests.llm.conftest import fake_spec, registry_of

CONFIG = BenchmarkConfig(per_genre=1, generate=GenerateParams(models=("wb", "wd")),
                         judge=JudgeParams(judges=["judge"]), drift=None,
                         batch=BatchOptions(poll_initial_s=0.1, poll_max_s=0.2))
# Some judge replies break the answer format (a re-ask follows, and may fail again).
SCENARIO = {"faults": [{"kind": "invalid_structured", "rate": 0.4, "seed": 5,
                        "models": ["judge"]}],
            "batch": {"delay_s": 0.3}}
VOLATILE = ("latency_s", "started_at", "finished_at", "generated_at", "judged_at",
            "from_ledger", "cost_usd", "batched")


def _registry(fake: FakeServerHandle, batch: bool) -> Registry:
    mode = "openai" if batch else "none"
    return registry_of(*(fake_spec(name, model_id=name, base_url=fake.base_url,
                                   batch=mode if name != "wd" else "none",
                                   batch_price_factor=0.5)
                         for name in ("wb", "wd", "judge")))


def _stable(snapshot: Snapshot) -> pl.DataFrame:
    table = snapshot.read()
    return table.drop([c for c in table.columns if c in VOLATILE]).sort(
        [c for c in ("model", "prompt_id", "judge") if c in table.columns])


def _ledger(store: Store) -> pl.DataFrame:
    with duckdb.connect(str(store.root / "ledger.duckdb"), read_only=True) as con:
        ledger: pl.DataFrame = con.sql(
            "SELECT key, model, stage, status, batched, cost_usd, reasks "
            "FROM llm_calls ORDER BY key").pl()
        return ledger


@pytest.fixture
def stores(curated: Store, tmp_path: Path) -> tuple[Store, Store]:
    return copy_store(curated, tmp_path / "direct"), copy_store(curated, tmp_path / "batch")


def test_generate_and_judge_in_batch_mode_end_as_direct_calls(
        stores: tuple[Store, Store], monkeypatch: pytest.MonkeyPatch) -> None:
    direct_store, batch_store = stores
    # One server (the calls' keys hash its URL), its counters reset between the runs: the
    # fault decisions depend on how often a body has arrived.
    with run_fake_server(FakeScenario.model_validate(SCENARIO)) as fake:
        record_run(direct_store, "r1")
        direct = run_stages(direct_store, "r1", CONFIG, ["generate", "judge"], None,
                            registry=_registry(fake, batch=False))
        fake.reset()
        record_run(batch_store, "r1")
        batched = run_stages(batch_store, "r1", CONFIG, ["generate", "judge"], None,
                             registry=_registry(fake, batch=True))
        stats = fake.stats()
    for stage in ("generate", "judge"):
        a, b = _stable(batched[stage]), _stable(direct[stage])
        diff = [c for c in a.columns if not a[c].equals(b[c])]
        assert not diff, (stage, diff, a.select(diff).rows()[:6], b.select(diff).rows()[:6])
    judged = batched["judge"].read()
    assert judged.height > 0 and "ok" in set(judged["status"])
    # Only the direct writer and the re-asks after a batched judge reply went direct.
    calls = _ledger(batch_store)
    reasked = calls.filter((pl.col("model") == "judge") & (pl.col("reasks") > 0)).height
    assert reasked > 0, "the scenario's invalid replies should have caused re-asks"
    assert set(stats.per_model) <= {"wd", "judge"}
    assert stats.per_model.get("judge") is None or (
        stats.per_model["judge"].received >= reasked)
    assert stats.batch is not None and stats.batch.batches_created >= 2  # generate, judge
    assert calls.filter(pl.col("model") == "wd")["batched"].is_null().all()
    assert calls.filter(pl.col("model") != "wd")["batched"].fill_null(False).all()
    # Each batched call costs half of what the same call cost direct.
    plain = _ledger(direct_store).select("key", direct_cost="cost_usd", direct_reasks="reasks")
    both = calls.join(plain, on="key")
    assert both.height == calls.height
    first_only = both.filter((pl.col("model") != "wd") & (pl.col("reasks") == 0))
    assert first_only.height > 0
    assert ((first_only["cost_usd"] - first_only["direct_cost"] * 0.5).abs() < 1e-12).all()
    direct_only = both.filter(pl.col("model") == "wd")
    assert (direct_only["cost_usd"] == direct_only["direct_cost"]).all()


def test_a_run_that_does_not_wait_is_entered_until_done(
        curated_copy: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    store = curated_copy
    scenario = FakeScenario.model_validate({"batch": {"delay_s": 1.5}})
    entries = 0
    with run_fake_server(scenario) as fake:
        registry = _registry(fake, batch=True)
        record_run(store, "r1")
        snaps: dict[str, Any] = {}
        deadline = time.monotonic() + 60
        while not snaps:
            entries += 1
            try:
                snaps = run_stages(store, "r1", CONFIG, ["generate", "judge"], None,
                                   registry=registry, batch_waiting="return")
            except BatchesPending:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        stats = fake.stats()
    assert entries >= 3  # at least one wait for the writers' batch and one for the judge's
    assert stats.batch is not None
    assert set(stats.batch.batches_per_custom_id) == {"1"}  # no call in two batches
    assert stats.per_model["wd"].received == stats.per_model["wd"].completed
    calls = _ledger(store)
    assert calls.filter(pl.col("model") == "wd").height == stats.per_model["wd"].received
    assert calls["key"].n_unique() == calls.height  # each call recorded once
    assert set(snaps) == {"generate", "judge"} and snaps["judge"].read().height > 0
    # Each entry that waited is a stage run recorded as waiting, never as failed.
    statuses = [r.status for r in store.stage_runs("r1")]
    assert statuses.count("waiting") == entries - 1 and "failed" not in statuses
    # (an entry after the writers' batch ended writes generate again, from the ledger)
    assert set(statuses) == {"waiting", "ok"} and statuses.count("ok") >= 2
