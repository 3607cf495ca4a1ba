"""Two weekly runs through the stages on the fake server; between them the writer starts
answering in short English under a new model id. The second run's alerts stage compares
with the first, stores the alerts, POSTs them to a real receiver on 127.0.0.1 (and fails,
recorded, to one that is down), and ``essaybench alerts --run`` prints them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from essaybench.bench.alerts import AlertParams
from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.cli import app
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.stages.alerts import alerts_stage, run_alerts
from essaybench.stages.pipeline import BENCHMARK_STAGES, run_stages
from essaybench.store import Store
from essaybench.store.runs import record_run
from tests.helpers import Receiver, closed_port_url

ENGLISH = ("The door opened and I walked into the quiet morning, thinking about the "
           "people I love and the roads I have not taken yet.")
# "*": the judge keeps answering (a scenario answers only the models it names).
WEEK_2 = FakeScenario.model_validate({"models": {"writer": {
    "reply": "template", "template": ENGLISH, "returned_model": "writer-2025-06"}, "*": {}}})


def use_models(path: Path, base_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    entry = {"provider": "fake", "base_url": base_url, "family": "fake",
             "structured_output": "json_schema", "max_concurrency": 4, "timeout_s": 10}
    path.write_text(yaml.safe_dump({"models": {
        "writer": {**entry, "model_id": "writer"},
        "judge": {**entry, "model_id": "judge"}}}), encoding="utf-8")
    monkeypatch.setenv("ESSAYBENCH_MODELS", str(path))


def week(store: Store, run_id: str, scenario: FakeScenario | None, config: BenchmarkConfig,
         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with run_fake_server(scenario) as server:
        use_models(tmp_path / f"models-{run_id}.yaml", server.base_url, monkeypatch)
        record_run(store, run_id)
        run_stages(store, run_id, config, BENCHMARK_STAGES, None)


def test_second_week_alerts_are_stored_delivered_and_printed(
        curated_copy: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = curated_copy
    (store.root / "ledger.duckdb").unlink(missing_ok=True)
    down = closed_port_url()
    with Receiver() as receiver:
        config = BenchmarkConfig(
            per_genre=2, generate=GenerateParams(models=("writer",)),
            judge=JudgeParams(judges=["judge"]),
            alerts=AlertParams(n_boot=200, webhooks=(down, receiver.url),
                               webhook_timeout_s=2))
        week(store, "w1", None, config, tmp_path, monkeypatch)
        first = alerts_stage(store, "w1", config.alerts,
                             store.require_ok_snapshot("judge", "w1", "test"))
        assert first.base_run is None and first.alerts == []
        assert first.lines() == ["alerts: run w1: no comparable run "
                                 "(no earlier run with a judge stage)"]
        assert receiver.bodies == []  # nothing to tell

        week(store, "w2", WEEK_2, config, tmp_path, monkeypatch)
        second = alerts_stage(store, "w2", config.alerts,
                              store.require_ok_snapshot("judge", "w2", "test"))

    kinds = {a.kind for a in second.alerts}
    assert second.base_run == "w1"
    judged = store.require_ok_snapshot("judge", "w2", "test").read()
    assert set(judged["status"]) == {"ok"}, judged["status"].value_counts()
    # Flagged essays count as the leaderboard's rule (the config's default) says.
    [row] = [r for r in store.stage_runs("w2", 100) if r.stage == "alerts"]
    assert (row.meta or {})["flagged_essays"] == "second_opinion"
    assert {"off_language", "model_id_changed"} <= kinds
    # The snapshot holds them; its catalog row what was compared and delivered.
    assert set(second.snapshot.read()["kind"]) == kinds
    assert [d.startswith("NOT delivered to http://127.0.0.1:") for d in second.deliveries] \
        == [True, False]
    assert "refused" in second.deliveries[0]
    [body] = receiver.bodies
    assert body["run_id"] == "w2" and body["base_run"] == "w1"
    assert {a["kind"] for a in body["alerts"]} == kinds
    assert "secret-token" not in str(second.snapshot.meta) and "secret-token" not in \
        (second.report.read_text(encoding="utf-8"))
    assert "off_language" in second.report.read_text(encoding="utf-8")

    again = run_alerts(store, "w2")
    assert again.alerts == second.alerts and again.deliveries == second.deliveries

    out = CliRunner().invoke(app, ["alerts", "--run", "w2", "--store", str(store.root)])
    assert out.exit_code == 0, out.output
    assert f"alerts: run w2 vs w1: {len(kinds)} alert(s)" in out.output
    assert "[critical] off_language: writer: 100% of essays not written in Chinese" \
        in out.output
    assert "writer-2025-06" in out.output and "NOT delivered" in out.output
    missing = CliRunner().invoke(app, ["alerts", "--run", "nope", "--store", str(store.root)])
    assert missing.exit_code == 2 and "has no alerts stage" in missing.output
