"""A sharded pipeline run under a real Prefect engine, its shards run in this process in
place of the work pool: the parent assembles the result from the plan and the parts,
sends no call, and a config and registry edited on disk while the shards run change
nothing (the stages after the assembly read the plan's config too); a missing part fails
the run in one line before anything is sent, and the catalog gets no ok generate or
judge row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from essaybench.bench.health import DEFAULT_COVERAGE_FLOOR
from essaybench.bench.sharding import ShardingParams
from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.server import run_fake_server
from essaybench.runs.health import run_health
from essaybench.runs.shards import success_path
from essaybench.stages.shard import run_shard
from essaybench.store import Store
from essaybench.store.parts import PartStore

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_engine")]
CURATE = str(PROJECT_ROOT / "configs" / "curate.yaml")


def _write(path: Path, doc: dict[str, Any]) -> None:
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")


@pytest.mark.parametrize("damage", [True, False])
def test_a_sharded_pipeline_assembles_from_the_plan_and_never_replays(
        curated_copy: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        damage: bool) -> None:
    from essaybench.flows import pipeline as pipeline_module

    config = tmp_path / "benchmark.yaml"
    bench = {"per_genre": 1, "generate": {"models": ["writer"], "temperature": 0.8},
             "judge": {"judges": ["judge"]}, "drift": None}
    _write(config, bench)
    models = tmp_path / "models.yaml"
    with run_fake_server() as fake:
        entry = {"provider": "fake", "family": "fake", "structured_output": "json_schema",
                 "base_url": fake.base_url, "max_concurrency": 4, "timeout_s": 10}
        _write(models, {"models": {m: {**entry, "model_id": m} for m in ("writer", "judge")}})
        monkeypatch.setenv("ESSAYBENCH_MODELS", str(models))
        by_shards: dict[str, int] = {}

        def in_process(parts: PartStore, run_id: str, n: int, params: ShardingParams,
                       poll_s: float = 2.0, plan_digest: str | None = None) -> dict[int, int]:
            # Edited while the shards run: other requests (a new temperature), another
            # model id; a replay from disk would send every call again.
            # And a coverage floor the aggregate would record: it reads the plan's config.
            _write(config, {**bench, "generate": {"models": ["writer"], "temperature": 0.3},
                            "health": {"coverage_floor": 0.25}})
            _write(models, {"models": {m: {**entry, "model_id": m + "-v2"}
                                       for m in ("writer", "judge")}})
            for k in range(n):
                run_shard(parts, run_id, k, plan_digest=plan_digest)
            if damage:
                done = parts.read_json(success_path(run_id, "judge", 1))
                assert done is not None
                parts.remove_status(done["parts"]["judge"])
            by_shards["sent"] = fake.stats().totals.received
            return dict.fromkeys(range(n), 1)

        monkeypatch.setattr(pipeline_module, "run_shards", in_process)
        state = pipeline_module.pipeline_flow(str(config), CURATE, str(curated_copy.root),
                                              False, shards=2, return_state=True)
        received = fake.stats().totals.received
    assert by_shards["sent"] > 0 and received == by_shards["sent"]  # the parent sent none
    rows = [r for r in curated_copy.stage_runs() if r.stage in ("generate", "judge")]
    if damage:
        assert state.is_failed()
        assert (state.message or "").startswith("run ")
        assert "shard 1's judge part" in (state.message or "")
        assert "\n" not in (state.message or "")
        assert not any(r.status == "ok" for r in rows)
        return
    assert state.is_completed()
    assert sorted((r.stage, r.status) for r in rows) == [("generate", "ok"), ("judge", "ok")]
    generated = next(r.snapshot_id for r in rows if r.stage == "generate")
    assert generated is not None
    essays = curated_copy.get_snapshot(generated)
    assert essays.meta["params"]["temperature"] == 0.8  # the plan's, not the edited file's
    assert set(essays.read()["model_id"]) == {"writer"}
    health = run_health(curated_copy, rows[0].run_id)  # the aggregate's, after the shards
    assert health is not None and health.coverage_floor == DEFAULT_COVERAGE_FLOOR != 0.25
    # Stats (and pairwise, when configured) read the plan's registry, not the edited one.
    pinned = yaml.safe_load((curated_copy.root / "plans" / f"{rows[0].run_id}.models.yaml")
                            .read_text(encoding="utf-8"))
    assert {m: e["model_id"] for m, e in pinned["models"].items()} == {"writer": "writer",
                                                                       "judge": "judge"}
