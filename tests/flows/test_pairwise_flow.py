"""The pairwise flow under a real Prefect engine, reading a run's generate snapshot."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import yaml

from essaybench.core.contracts import StageOutput
from essaybench.llm.fake.server import run_fake_server
from essaybench.store import Store
from essaybench.store.run_stage import run_stage
from tests.helpers import essays

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_engine")]


def test_pairwise_flow_then_rerun_pays_nothing_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from essaybench.flows.pairwise import pairwise_flow

    store = Store(tmp_path / "store")
    table = essays(["m1", "m2", "m3"], 2, status={("p0", "m3"): "truncated"})
    table = table.with_columns(decision=table["status"].replace({"ok": "kept"}))
    gen = run_stage(store, run_id="r1", stage="generate", upstream=[], params={},
                    compute=lambda: StageOutput(table))
    config = tmp_path / "benchmark.yaml"  # the settings under "pairwise:", beside others
    config.write_text(yaml.safe_dump({
        "generate": {"models": ["m1", "m2", "m3"]},
        "pairwise": {"judges": ["judge"], "design": "baseline", "baseline": "m1",
                     "analysis_max_chars": 300}}), encoding="utf-8")
    with run_fake_server() as server:
        registry = tmp_path / "models.yaml"
        registry.write_text(yaml.safe_dump({"models": {"judge": {
            "provider": "fake", "base_url": server.base_url, "model_id": "judge",
            "family": "fake", "structured_output": "json_schema", "max_concurrency": 4,
            "timeout_s": 10}}}), encoding="utf-8")
        monkeypatch.setenv("ESSAYBENCH_MODELS", str(registry))

        # As `essaybench pairwise --run r1`: the calls belong to run r1.
        first = pairwise_flow(str(config), str(store.root), run_id="r1", base_run="r1")
        sent = server.stats().totals.received
        again = pairwise_flow(str(config), str(store.root), run_id="r1",
                              upstream_snapshot_id=gen.snapshot_id)
        assert server.stats().totals.received == sent == 3 * 2  # 3 sendable pairs × 2 orders
        # Another run measures afresh: it pays for every call again.
        fresh = pairwise_flow(str(config), str(store.root), run_id="r2",
                              upstream_snapshot_id=gen.snapshot_id)
        assert server.stats().totals.received == 2 * sent

    snap = store.get_snapshot(first)
    assert snap.stage == "pairwise" and snap.upstream_snapshot_ids == (gen.snapshot_id,)
    merged = snap.read()
    assert merged.select("prompt_id", "model_a", "model_b", "status").rows() == [
        ("p0", "m2", "m1", "ok"), ("p0", "m3", "m1", "skipped"),
        ("p1", "m2", "m1", "ok"), ("p1", "m3", "m1", "ok")]
    assert merged.filter(pl.col("status") == "ok")["verdict"].is_in(["A", "B", "tie"]).all()
    assert store.get_snapshot(again).read()["verdict"].equals(merged["verdict"])
    assert store.get_snapshot(fresh).read().height == merged.height
    assert [r.stage for r in store.stage_runs("r2")] == ["pairwise"]
