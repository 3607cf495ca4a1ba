"""``essaybench calibrate`` under a real Prefect engine: the judges score the anchor set on
the fake server; the first calibration is the judge's reference, a second one (same judge)
agrees with it and says the runs stay comparable; a config with drift off is one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from essaybench.cli import app
from essaybench.llm.fake.server import run_fake_server
from essaybench.runs.calibration import find_calibration
from essaybench.store import Store

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_engine")]


def test_calibrate_prints_each_judge_and_records_the_reference(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "store")
    config = tmp_path / "bench.yaml"
    config.write_text(yaml.safe_dump({"generate": {"models": ["judge"]},
                                      "judge": {"judges": ["judge"]},
                                      "drift": {"anchors": 6, "min_anchors": 6}}),
                      encoding="utf-8")
    with run_fake_server() as server:
        (tmp_path / "models.yaml").write_text(yaml.safe_dump({"models": {"judge": {
            "provider": "fake", "base_url": server.base_url, "model_id": "judge",
            "family": "fake", "structured_output": "json_schema"}}}), encoding="utf-8")
        monkeypatch.setenv("ESSAYBENCH_MODELS", str(tmp_path / "models.yaml"))
        args = ["calibrate", "--config", str(config), "--store", str(store.root)]
        first = CliRunner().invoke(app, args)
        second = CliRunner().invoke(app, args)
        assert server.stats().totals.received == 12  # 6 anchors, each calibration afresh

    assert first.exit_code == 0, first.output
    assert "judge judge: calibrated (first use: 6 of 6 anchors scored" in first.stdout
    assert second.exit_code == 0, second.output
    assert "re-calibrated (no change)" in second.stdout and "stable" in second.stdout
    assert "comparable with earlier weeks" in second.stdout
    reference = find_calibration(store, "judge")
    assert reference is not None and reference.stage == "calibrate"
    assert reference.snapshot.read().height == 6

    off = tmp_path / "off.yaml"
    off.write_text(yaml.safe_dump({"generate": {"models": ["judge"]},
                                   "judge": {"judges": ["judge"]}, "drift": None}),
                   encoding="utf-8")
    refused = CliRunner().invoke(app, ["calibrate", "--config", str(off), "--store",
                                       str(store.root)])
    said = " ".join(re.sub(r"[│╭╮╰╯─]", " ", refused.output).split())  # any panel unwrapped
    assert refused.exit_code == 2 and "drift: null" in said
