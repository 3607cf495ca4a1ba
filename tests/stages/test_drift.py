"""The judge-drift sentinel through the real stages, gateway, ledger and store, with the
fake server as judge (its schema-generated scores are a deterministic function of the
request and the scenario's seed: the same judge re-scores the anchors identically, a
re-seeded one is a different judge).

- week 1 calibrates the judge, week 2 re-scores the anchors within tolerance, week 3's
  judge has drifted: alert, and its quality comparisons are skipped; week 4 (the judge
  back) is compared with week 2, not with the drifted week 3;
- a changed judge is refused before any call; forced, it re-calibrates and is not
  compared with earlier weeks; ``calibrate`` links a change that scores the anchors alike
  (comparable across it) and starts a new series for one that does not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from essaybench.bench.alerts import AlertParams
from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.drift import DriftParams
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.cli import app
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.llm.registry import load_registry
from essaybench.llm.session import open_gateway
from essaybench.runs.calibration import (
    JudgeNotCalibrated,
    require_calibrated,
    run_drift,
    same_judge,
    stage_run_meta,
)
from essaybench.runs.comparable import last_comparable_run
from essaybench.stages.alerts import RunAlerts, alerts_stage
from essaybench.stages.calibrate import calibrate_stage, calibration_lines
from essaybench.stages.pipeline import BENCHMARK_STAGES, run_stages
from essaybench.store import Store
from essaybench.store.runs import record_run

ANCHORS = 8
CONFIG = BenchmarkConfig(per_genre=1, generate=GenerateParams(models=("writer",)),
                         judge=JudgeParams(judges=["judge"]),
                         alerts=AlertParams(n_boot=200),
                         drift=DriftParams(anchors=ANCHORS, min_anchors=6, n_boot=500))
RESEEDED = FakeScenario(seed=99)  # the same model id, scoring differently: drift


def use_models(path: Path, base_url: str, monkeypatch: pytest.MonkeyPatch,
               judge_provider: str = "fake") -> None:
    entry: dict[str, Any] = {"base_url": base_url, "family": "fake",
                             "structured_output": "json_schema", "max_concurrency": 4,
                             "timeout_s": 10}
    path.write_text(yaml.safe_dump({"models": {
        "writer": {**entry, "provider": "fake", "model_id": "writer"},
        "judge": {**entry, "provider": judge_provider, "model_id": "judge"}}}),
        encoding="utf-8")
    monkeypatch.setenv("ESSAYBENCH_MODELS", str(path))


class Weeks:
    """Weekly runs of the stages (as the pipeline flow runs them) on fake servers."""

    def __init__(self, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.store, self.tmp_path, self.monkeypatch = store, tmp_path, monkeypatch

    def serve(self, server: FakeServerHandle, provider: str = "fake") -> None:
        use_models(self.tmp_path / "models.yaml", server.base_url, self.monkeypatch, provider)

    def run(self, run_id: str, scenario: FakeScenario | None = None,
            config: BenchmarkConfig = CONFIG, provider: str = "fake",
            forced: bool = False) -> RunAlerts:
        with run_fake_server(scenario) as server:
            self.serve(server, provider)
            require_calibrated(self.store, config, load_registry(), "bench.yaml", forced)
            record_run(self.store, run_id)
            snaps = run_stages(self.store, run_id, config, BENCHMARK_STAGES, None, forced)
        return alerts_stage(self.store, run_id, config.alerts, snaps["judge"])

    def verdict(self, run_id: str) -> dict[str, Any]:
        drift = run_drift(self.store, run_id)
        assert drift is not None
        return drift["judge"]


@pytest.fixture
def weeks(curated_copy: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Weeks:
    (curated_copy.root / "ledger.duckdb").unlink(missing_ok=True)
    return Weeks(curated_copy, tmp_path, monkeypatch)


def kinds(result: RunAlerts) -> set[str]:
    return {a.kind for a in result.alerts}


def not_compared(store: Store, run_id: str) -> dict[str, str]:
    [row] = [r for r in store.stage_runs(run_id, 100) if r.stage == "alerts"]
    assert row.meta is not None
    return dict(row.meta["judges_not_compared"])


def test_a_judge_that_re_scores_the_anchors_differently_is_caught(weeks: Weeks) -> None:
    one = weeks.run("w1")
    v1 = weeks.verdict("w1")
    assert (v1["verdict"], v1["n_anchors"], v1["comparable"]) == ("calibrated", ANCHORS, True)
    assert not kinds(one) & {"judge_drift", "judge_unverified", "judge_changed"}

    weeks.run("w2")
    v2 = weeks.verdict("w2")
    assert v2["verdict"] == "stable" and v2["reference_run"] == "w1"
    assert (v2["n_paired"], v2["shift"]) == (ANCHORS, 0.0)
    assert v2["spearman"] == pytest.approx(1.0)
    assert not_compared(weeks.store, "w2") == {}

    three = weeks.run("w3", RESEEDED)
    v3 = weeks.verdict("w3")
    assert v3["verdict"] == "drifted" and not v3["comparable"]
    assert v3["spearman"] < 0.6 and "rank correlation" in v3["reason"]
    drift_alert = next(a for a in three.alerts if a.kind == "judge_drift")
    assert drift_alert.judge == "judge" and drift_alert.severity == "critical"
    assert "not compared with earlier weeks" in drift_alert.message
    # Its cells are not compared: no quality alert can come from a drifted judge.
    assert three.base_run == "w2"
    assert "drifted in this run" in not_compared(weeks.store, "w3")["judge"]
    assert "quality_drop" not in kinds(three)

    # Week 4, the judge is back: compared with week 2, not with the drifted week 3.
    four = weeks.run("w4")
    assert weeks.verdict("w4")["verdict"] == "stable"
    assert four.base_run == "w2"
    baseline = last_comparable_run(weeks.store, "w4",
                                   weeks.store.require_ok_snapshot("judge", "w4", "test"))
    assert ("w3", "judge judge failed its anchor check in that run") in baseline.skipped
    assert not_compared(weeks.store, "w4") == {}


def test_a_changed_judge_is_refused_forced_or_calibrated(
        weeks: Weeks, tmp_path: Path) -> None:
    weeks.run("w1")
    runs_before = {r.run_id for r in weeks.store.stage_runs(None, 1000)}
    hotter = CONFIG.model_copy(update={"judge": JudgeParams(judges=["judge"],
                                                            temperature=0.3)})
    with pytest.raises(JudgeNotCalibrated) as refused:
        weeks.run("w2", config=hotter)
    message = str(refused.value)
    assert "judge judge: settings:" in message and "temperature=0.2" in message
    assert "temperature=0.3" in message and "essaybench calibrate --config bench.yaml" in message
    assert "\n" not in message
    assert {r.run_id for r in weeks.store.stage_runs(None, 1000)} == runs_before  # no work

    # Forced: the run re-calibrates; its judge is not compared with earlier weeks.
    forced = weeks.run("w2", config=hotter, forced=True)
    assert weeks.verdict("w2")["verdict"] == "recalibrated"
    assert "judge_changed" in kinds(forced)
    assert "recalibrated in this run" in not_compared(weeks.store, "w2")["judge"]
    # From then on the changed judge is calibrated: next week runs unforced, and is
    # compared with the forced week (same identity), not refused.
    weeks.run("w3", config=hotter)
    assert weeks.verdict("w3")["verdict"] == "stable"
    assert not_compared(weeks.store, "w3") == {}


def calibrate(weeks: Weeks, run_id: str, config: BenchmarkConfig,
              provider: str) -> dict[str, Any]:
    with run_fake_server() as server:
        weeks.serve(server, provider)
        record_run(weeks.store, run_id, from_stage="calibrate")
        registry = load_registry()
        with open_gateway(registry, weeks.store.root, ["judge"]) as session:
            calibrate_stage(weeks.store, run_id, config, registry, session)
    return stage_run_meta(weeks.store, run_id, "calibrate")


def test_calibrate_links_a_change_that_scores_alike_and_not_one_that_does_not(
        weeks: Weeks) -> None:
    weeks.run("w1")
    w1_identity = weeks.verdict("w1")["identity"]
    # Another provider label, the same model answering the same way: calibrated to agree.
    meta = calibrate(weeks, "c1", CONFIG, "fake-proxy")
    judge = meta["judges"]["judge"]
    assert judge["verdict"] == "stable" and judge["previous"] == w1_identity
    assert meta["continues"]["judge"] == w1_identity
    assert judge["changes"] == ["endpoint: default_params=, model_id=judge, provider=fake → "
                                "default_params=, model_id=judge, provider=fake-proxy"]
    [line] = calibration_lines(meta)
    assert "comparable with earlier weeks" in line and "NOT" not in line
    two = weeks.run("w2", provider="fake-proxy")
    assert same_judge(weeks.store, weeks.verdict("w2")["identity"], w1_identity)
    assert two.base_run == "w1" and not_compared(weeks.store, "w2") == {}

    # A hotter judge scores the anchors differently: a new series, not comparable.
    hotter = CONFIG.model_copy(update={"judge": JudgeParams(judges=["judge"],
                                                            temperature=0.5)})
    meta = calibrate(weeks, "c2", hotter, "fake-proxy")
    assert meta["judges"]["judge"]["verdict"] == "drifted" and meta["continues"]["judge"] is None
    assert "NOT comparable" in calibration_lines(meta)[0]
    three = weeks.run("w3", config=hotter, provider="fake-proxy")  # calibrated: not refused
    assert weeks.verdict("w3")["verdict"] == "stable"
    assert three.base_run == "w2"  # writers' metrics are still compared ...
    assert "another identity" in not_compared(weeks.store, "w3")["judge"]  # ... not the judge


def test_run_refuses_a_changed_judge_in_one_line_before_any_work(
        weeks: Weeks, tmp_path: Path) -> None:
    weeks.run("w1")
    config = tmp_path / "bench.yaml"
    config.write_text(yaml.safe_dump(
        {"per_genre": 1, "generate": {"models": ["writer"]},
         "judge": {"judges": ["judge"], "max_tokens": 999}}), encoding="utf-8")
    before = len(weeks.store.stage_runs(None, 1000))
    with run_fake_server() as server:
        weeks.serve(server)
        result = CliRunner().invoke(app, ["run", "--config", str(config), "--store",
                                          str(weeks.store.root), "--no-curate"])
        assert server.stats().totals.received == 0
    assert result.exit_code == 2, result.output
    assert "max_tokens=2048" in result.output and "max_tokens=999" in result.output
    assert "--force-uncalibrated" in result.output and "Traceback" not in result.output
    assert len(weeks.store.stage_runs(None, 1000)) == before


def test_anchors_are_judged_once_whatever_judge_repeats_says() -> None:
    # The anchors measure the judge's single call, as its calibration did: judge.repeats
    # (here 3, for every essay) does not multiply their calls nor make them medians.
    from essaybench.llm.types import CallStatus, ChatRequest, ChatResult
    from essaybench.stages.drift import judge_anchors

    sent: list[ChatRequest] = []

    class Recorder:
        def run(self, requests: Any) -> list[ChatResult]:
            sent.extend(requests)
            return [ChatResult(key=f"k{i}", model=r.model, status=CallStatus.API_ERROR)
                    for i, r in enumerate(requests)]

    judge = JudgeParams(judges=["j1", "j2"], repeats=3, repeat_when="all")
    table = judge_anchors(DriftParams(anchors=4), judge, Recorder(), "drift")
    assert len(sent) == 4 * 2 and {r.sample_index for r in sent} == {0}
    assert table.height == 8 and set(table["repeats"]) == {1}
