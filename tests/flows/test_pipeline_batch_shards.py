"""A sharded pipeline run with a batched registry entry is refused in one line before the
shards start (a shard's ledger has no batch journal), under a real Prefect engine."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.server import run_fake_server
from essaybench.store import Store

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_engine")]
CURATE = str(PROJECT_ROOT / "configs" / "curate.yaml")


def test_a_sharded_run_with_a_batched_entry_is_refused_before_any_call(
        curated_copy: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from essaybench.flows.pipeline import pipeline_flow

    config = tmp_path / "benchmark.yaml"
    config.write_text(yaml.safe_dump({"per_genre": 1, "generate": {"models": ["writer"]},
                                      "judge": {"judges": ["judge"]}}), encoding="utf-8")
    with run_fake_server() as fake:
        common = {"provider": "fake", "family": "fake", "structured_output": "json_schema",
                  "base_url": fake.base_url}
        models = tmp_path / "models.yaml"
        models.write_text(yaml.safe_dump({"models": {
            "writer": {**common, "model_id": "writer", "batch": "anthropic",
                       "default_params": {"max_tokens": 256}},
            "judge": {**common, "model_id": "judge"}}}), encoding="utf-8")
        monkeypatch.setenv("ESSAYBENCH_MODELS", str(models))
        refused = pipeline_flow(str(config), CURATE, str(curated_copy.root), False, shards=2,
                                return_state=True)
        stats = fake.stats()
    assert refused.is_failed()
    assert (refused.message or "").startswith("model 'writer' has batch: anthropic")
    assert "not supported in a sharded run" in (refused.message or "")
    assert stats.totals.received == 0 and (stats.batch is None
                                           or stats.batch.batches_created == 0)
