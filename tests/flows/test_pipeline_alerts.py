"""The pipeline flow ends with the alerts stage under a real Prefect engine: week 2 (the
writer now answers in English under a new model id) is compared with week 1, its alerts
become a Markdown artifact on the flow run and reach a webhook receiver on 127.0.0.1 (one
receiver down: recorded, the run completes); week 3 has its judge down — the run fails,
and its alerts are still computed and delivered."""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

import pytest
import yaml

from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.stages.alerts import run_alerts
from essaybench.store import Store
from essaybench.store.runs import get_run
from tests.helpers import Receiver, closed_port_url

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_engine")]
CURATE = str(PROJECT_ROOT / "configs" / "curate.yaml")
ENGLISH = "The door opened and I walked into the quiet morning light, thinking of home."


def _registry(path: Path, writer_url: str, judge_url: str) -> None:
    common = {"provider": "fake", "family": "fake", "structured_output": "json_schema",
              "max_concurrency": 4, "timeout_s": 10, "max_retries": 0}
    path.write_text(yaml.safe_dump({"models": {
        "writer": {**common, "base_url": writer_url, "model_id": "writer"},
        "judge": {**common, "base_url": judge_url, "model_id": "judge"}}}), encoding="utf-8")


def _artifact(store: Store, run_id: str, kind: str = "alerts") -> str:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    record = get_run(store, run_id)
    assert record is not None and record.flow_run_id is not None
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[UUID(record.flow_run_id)])))
    [artifact] = [a for a in artifacts if (a.key or "").startswith(f"{kind}-")]
    assert artifact.type == "markdown"
    return str(artifact.data)


def test_pipeline_alerts_artifact_webhooks_and_a_failed_run(
        curated_copy: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from essaybench.flows.pipeline import pipeline_flow

    store, registry = curated_copy, tmp_path / "models.yaml"
    monkeypatch.setenv("ESSAYBENCH_MODELS", str(registry))
    config = tmp_path / "benchmark.yaml"
    with Receiver() as receiver:
        config.write_text(yaml.safe_dump({
            "per_genre": 2, "generate": {"models": ["writer"]}, "judge": {"judges": ["judge"]},
            "alerts": {"n_boot": 200, "webhook_timeout_s": 2,
                       "webhooks": [closed_port_url(), receiver.url]}}), encoding="utf-8")
        week2_writer = FakeScenario.model_validate({"models": {"writer": {
            "reply": "template", "template": ENGLISH, "returned_model": "writer-2025-06"}}})
        with run_fake_server() as server:
            _registry(registry, server.base_url, server.base_url)
            week1 = pipeline_flow(str(config), CURATE, str(store.root), False)
        with run_fake_server(week2_writer) as writer, run_fake_server() as judge:
            _registry(registry, writer.base_url, judge.base_url)
            week2 = pipeline_flow(str(config), CURATE, str(store.root), False)
        assert week2["health"].startswith("healthy")  # the run completed
        with run_fake_server() as server:  # week 3: the judge is down
            _registry(registry, server.base_url, closed_port_url())
            state = pipeline_flow(str(config), CURATE, str(store.root), False,
                                  return_state=True)
        assert state.is_failed() and "is unhealthy" in (state.message or "")

    assert run_alerts(store, week1["run_id"]).base_run is None
    two = run_alerts(store, week2["run_id"])
    assert two.base_run == week1["run_id"]
    assert {"off_language", "model_id_changed"} <= {a.kind for a in two.alerts}
    assert [d.startswith("NOT delivered") for d in two.deliveries] == [True, False]
    markdown = _artifact(store, week2["run_id"])
    assert f"Compared with run {week1['run_id']}" in markdown and "off_language" in markdown
    assert "NOT delivered" in markdown
    # The run's HTML report is written at its end and summarised in an artifact.
    page = store.root / "reports" / week2["run_id"] / "report.html"
    assert week2["report"] == str(page) and page.stat().st_size > 10_000
    summary = _artifact(store, week2["run_id"], "report")
    assert str(page) in summary and "Overall weighted score" in summary

    # Week 3 failed, yet compared with week 2 (healthy) and told the receiver.
    week3 = [r.run_id for r in store.stage_runs(None, 1000) if r.stage == "alerts"
             and r.run_id not in (week1["run_id"], week2["run_id"])]
    three = run_alerts(store, week3[0])
    assert three.base_run == week2["run_id"]
    assert "model_id_changed" in {a.kind for a in three.alerts}  # writer-2025-06 → writer
    assert [b["run_id"] for b in receiver.bodies] == [week2["run_id"], week3[0]]
    assert (store.root / "reports" / week3[0] / "report.html").is_file()  # failed, reported
