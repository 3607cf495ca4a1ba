"""sampling: adaptive in the weekly pipeline flow under a real Prefect engine: the run
samples rounds on the fake server (scripted judge: three writers far apart), stops when
every pair is decided, and its decisions reach the catalog, the HTML report (escaped) and
the CLI's summary lines; a sharded adaptive run is refused before any call."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.server import run_fake_server
from essaybench.report.adaptive import adaptive_lines, adaptive_view
from essaybench.store import Store
from tests.stages.adaptive_fixtures import MARKS, config_yaml, registry_yaml, scenario

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_engine")]
CURATE = str(PROJECT_ROOT / "configs" / "curate.yaml")


def test_adaptive_pipeline_decides_reports_and_refuses_shards(
        curated_copy: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    from essaybench.flows.pipeline import pipeline_flow

    store = curated_copy
    config = tmp_path / "benchmark.yaml"
    config.write_text(yaml.safe_dump(config_yaml(
        {"mode": "adaptive", "round_size": 5, "floor_per_stratum": 1})), encoding="utf-8")
    with run_fake_server(scenario()) as server:
        models = tmp_path / "models.yaml"
        models.write_text(yaml.safe_dump(registry_yaml(server.base_url)), encoding="utf-8")
        monkeypatch.setenv("ESSAYBENCH_MODELS", str(models))
        out = pipeline_flow(str(config), CURATE, str(store.root), False)
        writers = {m: server.stats().per_model[m].received for m in MARKS}
        refused = pipeline_flow(str(config), CURATE, str(store.root), False, shards=2,
                                return_state=True)
        assert server.stats().per_model["writer-a"].received == writers["writer-a"]
    assert refused.is_failed() and "cannot run sharded" in (refused.message or "")
    view = adaptive_view(store, out["run_id"])
    assert view is not None and view.stop == "all_decided"
    assert writers == dict.fromkeys(MARKS, view.sampled) and view.sampled < view.of
    assert [q["label"] for q in view.questions] == [
        "writer-a better", "writer-a better", "writer-b better"]
    page = Path(out["report"]).read_text(encoding="utf-8")
    assert 'id="adaptive"' in page and "not anytime-valid" in page
    assert f"{view.sampled} of {view.of} prompts" in page
    lines = adaptive_lines(view)
    assert lines[0].startswith(f"adaptive sampling: {view.sampled} of {view.of} prompts")
    assert any("writer-a vs writer-b: writer-a better at" in line for line in lines)
    # the flow run's log says it too (a scheduled run has no terminal)
    captured = capfd.readouterr()
    # Prefect's console handler, or pytest's log capture when it holds the records
    logged = captured.out + captured.err + caplog.text
    assert lines[0] in logged and lines[1] in logged
