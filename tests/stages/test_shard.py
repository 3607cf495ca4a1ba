"""A sharded run without Prefect: plan, every shard, merge, replay. The merged snapshots
equal a single-process run's, the fake server is paid once per call per run, a shard
re-sent after it lost its outputs pays nothing, and merging twice adds nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.llm.part_ledger import ShardSuperseded
from essaybench.llm.registry import load_registry
from essaybench.runs.shards import ledger_prefix, owner_path, part_prefix, success_path
from essaybench.stages.pipeline import run_stages
from essaybench.stages.shard import (
    ShardError,
    check_merged,
    merge_ledgers,
    read_plan,
    run_shard,
    shard_done,
    stable_rows,
    write_plan,
)
from essaybench.store import Store
from essaybench.store.parts import PartStore
from essaybench.store.runs import record_run
from tests.helpers import copy_store
from tests.s3_server import S3Env

WRITERS = ("writer-a", "writer-b")
CONFIG = BenchmarkConfig(per_genre=3, generate=GenerateParams(models=WRITERS),
                         judge=JudgeParams(judges=["judge"]), drift=None)


# Each writer writes its own essays: two shards judging byte-identical essays each pay
# for the same judge request (one process sends it once); see README.
WRITING = FakeScenario.model_validate({"models": {"*": {
    "reply": "template", "template": "{model}写道：{prompt}"}}})


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServerHandle]:
    with run_fake_server(WRITING) as handle:
        entry = {"provider": "fake", "base_url": handle.base_url, "family": "fake",
                 "structured_output": "json_schema", "max_concurrency": 6, "timeout_s": 10}
        path = tmp_path / "models.yaml"
        path.write_text(yaml.safe_dump({"models": {
            name: {**entry, "model_id": name} for name in (*WRITERS, "judge")}}), "utf-8")
        monkeypatch.setenv("ESSAYBENCH_MODELS", str(path))
        yield handle


def fresh(curated: Store, folder: Path) -> Store:
    store = copy_store(curated, folder)
    (store.root / "ledger.duckdb").unlink(missing_ok=True)
    return store


def sharded_run(store: Store, parts: PartStore, run_id: str, shards: int) -> dict[str, Any]:
    record_run(store, run_id)
    plan = write_plan(store, parts, run_id, CONFIG, load_registry(), shards)
    records = [run_shard(parts, run_id, s.index) for s in plan.shards]
    merged = merge_ledgers(store, parts, plan)
    snaps = run_stages(store, run_id, CONFIG, ["generate", "judge"], None,
                       merged_since=plan.created_at)
    for stage in ("generate", "judge"):
        check_merged(parts, plan, stage, snaps[stage].read())
    return {"plan": plan, "records": records, "merged": merged, "snapshots": snaps}


def test_sharded_run_equals_single_process_and_pays_once(
        curated: Store, tmp_path: Path, server: FakeServerHandle) -> None:
    single = fresh(curated, tmp_path / "single")
    record_run(single, "one")
    alone = run_stages(single, "one", CONFIG, ["generate", "judge"], None)
    calls = server.stats().totals.received
    assert calls > 0

    store = fresh(curated, tmp_path / "sharded")
    parts = PartStore(tmp_path / "parts")
    out = sharded_run(store, parts, "many", shards=5)
    plan = out["plan"]
    assert len(plan.shards) == 5
    stats = server.stats()
    # Every call once in each run: the shards paid for the sharded run's, the replay none.
    assert stats.totals.received == 2 * calls
    assert {k: n for k, n in stats.received_per_key.items() if n} == {"2": calls}
    assert sum(r["sent"] for r in out["records"]) == calls
    snaps = out["snapshots"]
    for stage, keys in (("generate", ("prompt_id", "model")),
                        ("judge", ("prompt_id", "model", "judge"))):
        ours = stable_rows(snaps[stage].read(), keys)
        assert ours.equals(stable_rows(alone[stage].read(), keys)), stage
    assert snaps["judge"].read()["from_ledger"].all()


@pytest.fixture(params=["local", "s3"])
def parts(request: pytest.FixtureRequest, tmp_path: Path) -> PartStore:
    """Where the shards write: a local folder, or a bucket on a real S3-compatible server."""
    if request.param == "local":
        return PartStore(tmp_path / "parts")
    env: S3Env = request.getfixturevalue("s3")
    return PartStore(env.url("team-store"))


def test_shard_resends_nothing_and_merge_is_idempotent(
        curated: Store, tmp_path: Path, server: FakeServerHandle, parts: PartStore) -> None:
    store = fresh(curated, tmp_path / "store")
    out = sharded_run(store, parts, "r1", shards=3)
    sent = server.stats().totals.received
    # Done shards do nothing; a shard whose outputs were lost (a crash after its calls)
    # runs again on its own ledger parts and sends nothing.
    assert run_shard(parts, "r1", 0)["already_done"]
    parts.remove_status(success_path("r1", "judge", 1))
    again = run_shard(parts, "r1", 1)
    assert again["sent"] == 0 and not again.get("already_done")
    assert server.stats().totals.received == sent
    plan = read_plan(parts, "r1")
    assert plan is not None
    assert merge_ledgers(store, parts, plan)["added"] == 0
    assert out["merged"]["added"] > 0
    assert len(parts.list(part_prefix("r1", "judge", 1), ".parquet")) == 2


def test_merge_refuses_until_every_shard_succeeded(
        curated: Store, tmp_path: Path, server: FakeServerHandle) -> None:
    store = fresh(curated, tmp_path / "store")
    parts = PartStore(tmp_path / "parts")
    record_run(store, "r1")
    plan = write_plan(store, parts, "r1", CONFIG, load_registry(), 4)
    run_shard(parts, "r1", 0)
    with pytest.raises(ShardError, match=r"shard\(s\) 1, 2, 3 of 4 never succeeded"):
        merge_ledgers(store, parts, plan)
    with pytest.raises(ShardError, match="has shards 0–3, not 7"):
        run_shard(parts, "r1", 7)
    # The plan is written once: a restarted parent gets the same plan back.
    assert write_plan(store, parts, "r1", CONFIG, load_registry(), 9) == plan


def test_a_superseded_attempt_writes_nothing_and_its_double_calls_are_not_merged(
        curated: Store, tmp_path: Path, server: FakeServerHandle) -> None:
    store = fresh(curated, tmp_path / "store")
    parts = PartStore(tmp_path / "parts")
    record_run(store, "r1")
    plan = write_plan(store, parts, "r1", CONFIG, load_registry(), 2)
    # The parent sent attempt "new" of shard 0: attempt "old", still running, stops.
    parts.put_json(owner_path("r1", 0), {"attempt": "new"})
    with pytest.raises(ShardSuperseded, match="superseded"):
        run_shard(parts, "r1", 0, attempt="old")
    assert not shard_done(parts, "r1", 0)
    assert not parts.list(part_prefix("r1", "generate", 0), ".parquet")
    for index in (0, 1):
        parts.put_json(owner_path("r1", index), {"attempt": f"new{index}"})
        run_shard(parts, "r1", index, attempt=f"new{index}")
    # An earlier attempt of shard 1 made some of the same calls and got other answers
    # (stored after the owner's): only the owner's rows are merged, so the stages serve
    # what the shard wrote.
    own = [r for r in parts.list(ledger_prefix("r1", 1), ".parquet") if "new1" in r]
    mine = parts.read_parquets(own)
    twice = mine.head(3).with_columns(pl.lit("另一个回答").alias("response_text"),
                                      pl.col("finished_at") + pl.duration(seconds=60))
    parts.write_parquet(f"{ledger_prefix('r1', 1)}/part-zombie-000001.parquet", twice)
    merged = merge_ledgers(store, parts, plan)
    assert merged["superseded"] == 3
    snaps = run_stages(store, "r1", CONFIG, ["generate", "judge"], None,
                       merged_since=plan.created_at)
    for stage in ("generate", "judge"):
        check_merged(parts, plan, stage, snaps[stage].read())
