"""The pairwise stage against the store: settings file, upstream resolution, snapshot, rerun."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from essaybench.bench.pairwise.design import PairwiseParams
from essaybench.core.contracts import StageOutput
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.session import open_gateway
from essaybench.stages.pairwise import (
    PairwiseConfigError,
    load_pairwise_params,
    pairwise_stage,
    pairwise_upstream,
)
from essaybench.store import Snapshot, Store
from essaybench.store.run_stage import run_stage
from tests.helpers import essays
from tests.llm.conftest import fake_spec, registry_of


def generated(store: Store, run_id: str) -> Snapshot:
    """A generate snapshot of three models' essays, one of them failed, as the stage writes it."""
    table = essays(["m1", "m2", "m3"], 2, status={("p1", "m2"): "api_error"})
    table = table.with_columns(decision=table["status"].replace({"ok": "kept"}))
    return run_stage(store, run_id=run_id, stage="generate", upstream=[], params={},
                     compute=lambda: StageOutput(table))


def test_settings_at_top_level_or_under_pairwise(tmp_path: Path) -> None:
    flat = tmp_path / "pairwise.yaml"
    flat.write_text(yaml.safe_dump({"judges": ["j"], "design": "baseline", "baseline": "m1"}),
                    encoding="utf-8")
    assert load_pairwise_params(flat).baseline == "m1"
    nested = tmp_path / "benchmark.yaml"
    nested.write_text(yaml.safe_dump({"generate": {"models": ["m1"]},
                                      "pairwise": {"judges": ["j"], "seed": 3}}),
                      encoding="utf-8")
    assert load_pairwise_params(nested) == PairwiseParams(judges=["j"], seed=3)
    bad = tmp_path / "bad.yaml"
    for text, match in [("judges: [j]\nbogus: 1\n", "bogus"),
                        ("judges: [j]\njudges: [k]\n", "duplicate"),
                        ("design: baseline\njudges: [j]\n", "needs a baseline"),
                        ("generate: {models: [m]}\njudge: {judges: [j]}\n", "without a")]:
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(PairwiseConfigError, match=match) as info:
            load_pairwise_params(bad)
        assert str(bad) in str(info.value)
    with pytest.raises(PairwiseConfigError, match="not found"):
        load_pairwise_params(tmp_path / "missing.yaml")


def test_upstream_is_a_runs_generate_snapshot(tmp_path: Path) -> None:
    store = Store(tmp_path)
    with pytest.raises(LookupError, match="generate essays first"):
        pairwise_upstream(store)
    gen = generated(store, "r1")
    assert pairwise_upstream(store).snapshot_id == gen.snapshot_id
    assert pairwise_upstream(store, base_run="r1").snapshot_id == gen.snapshot_id
    assert pairwise_upstream(store, gen.snapshot_id).snapshot_id == gen.snapshot_id
    with pytest.raises(LookupError, match="run r2"):
        pairwise_upstream(store, base_run="r2")


def test_stage_writes_a_pairwise_snapshot_and_reruns_for_free(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    gen = generated(store, "r1")
    params = PairwiseParams(judges=["judge"])
    with run_fake_server() as server, open_gateway(
            registry_of(fake_spec("judge", model_id="judge")), store.root, ["judge"],
            base_urls={"judge": server.base_url}) as session:
        snap = pairwise_stage(store, "r1", params, gen, session)
        sent = server.stats().totals.received
        again = pairwise_stage(store, "r2", params, pairwise_upstream(store, base_run="r1"),
                               session)
        assert server.stats().totals.received == sent  # nothing paid twice
        with pytest.raises(ValueError, match="generate"):
            pairwise_stage(store, "r3", params, snap, session)
    assert snap.stage == "pairwise" and snap.upstream_snapshot_ids == (gen.snapshot_id,)
    table = snap.read()
    assert table.height == 6 and sent == 4 * 2  # 2 prompts × 3 pairs; 2 skipped on p1
    assert table.filter(table["status"] == "skipped")["prompt_id"].to_list() == ["p1", "p1"]
    assert snap.meta["position_bias"][0]["judge"] == "judge"
    runs = {(r.run_id, r.stage): r for r in store.stage_runs()}
    assert runs[("r1", "pairwise")].status == "ok" and runs[("r1", "pairwise")].rows_out == 4
    assert again.read().drop("from_ledger_ab", "from_ledger_ba").equals(
        table.drop("from_ledger_ab", "from_ledger_ba"))
