"""The pipeline flow under a real Prefect engine: each run makes fresh calls, a rerun of a
rerun reuses the lineage's, and every flow run is named after its run id and tagged."""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

import pytest
import yaml

from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.server import run_fake_server
from essaybench.store import Store
from essaybench.store.runs import get_run, looks_like_run_id

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_engine")]
CURATE = str(PROJECT_ROOT / "configs" / "curate.yaml")


def _flow_run(store: Store, run_id: str) -> tuple[str, list[str]]:
    from prefect.client.orchestration import get_client

    record = get_run(store, run_id)
    assert record is not None and record.flow_run_id is not None
    with get_client(sync_client=True) as client:
        flow_run = client.read_flow_run(UUID(record.flow_run_id))
    return flow_run.name, flow_run.tags


def test_runs_are_fresh_reruns_of_reruns_reuse_and_flow_runs_carry_the_run_id(
        curated_copy: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from essaybench.flows.pipeline import pipeline_flow

    store = curated_copy
    config = tmp_path / "benchmark.yaml"
    config.write_text(yaml.safe_dump({"per_genre": 2, "generate": {"models": ["writer"]},
                                      "judge": {"judges": ["judge"]},
                                      "drift": {"anchors": 4, "min_anchors": 4}}),
                      encoding="utf-8")
    with run_fake_server() as server:
        models = {m: {"provider": "fake", "base_url": server.base_url, "model_id": m,
                      "family": "fake", "structured_output": "json_schema",
                      "max_concurrency": 4, "timeout_s": 10} for m in ("writer", "judge")}
        (tmp_path / "models.yaml").write_text(yaml.safe_dump({"models": models}),
                                              encoding="utf-8")
        monkeypatch.setenv("ESSAYBENCH_MODELS", str(tmp_path / "models.yaml"))

        week1 = pipeline_flow(str(config), CURATE, str(store.root), False)
        week2 = pipeline_flow(str(config), CURATE, str(store.root), False)
        # per_genre 2: 10 essays (2 of them of prompts that leave the genre open) + 10
        # judgments + 2 genre calls + 4 anchors re-judged, twice
        assert server.stats().totals.received == 2 * 26
        rerun = pipeline_flow(str(config), CURATE, str(store.root), False, "judge",
                              week2["run_id"])
        again = pipeline_flow(str(config), CURATE, str(store.root), False, "generate",
                              rerun["run_id"], run_id="rerun-of-a-rerun")
        assert server.stats().totals.received == 2 * 26  # nothing new

    assert looks_like_run_id(week1["run_id"]) and week1["run_id"] != week2["run_id"]
    assert again["run_id"] == "rerun-of-a-rerun"
    for result in (week1, week2, rerun, again):
        name, tags = _flow_run(store, result["run_id"])
        assert name == result["run_id"] and result["run_id"] in tags
    record = get_run(store, "rerun-of-a-rerun")
    assert record is not None and record.kind == "rerun"
    assert record.reuse_scope == ("rerun-of-a-rerun", rerun["run_id"], week2["run_id"])
    assert record.config_path == str(config) and record.config_sha256 is not None
