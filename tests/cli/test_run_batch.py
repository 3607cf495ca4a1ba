"""``essaybench run`` (the pipeline flow in this process, no deployment) with a batched
writer: it polls its batch until done, printing one progress line per poll that names the
batch and its state, then finishes as a direct run would."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from essaybench.cli import app
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.store import Store
from tests.helpers import copy_store

pytestmark = pytest.mark.slow


def test_run_polls_its_batch_with_a_progress_line(curated: Store, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    store = copy_store(curated, tmp_path / "store")
    config = tmp_path / "bench.yaml"
    config.write_text(yaml.safe_dump({"per_genre": 1, "generate": {"models": ["writer"]},
                                      "judge": {"judges": ["judge"]},
                                      "batch": {"poll_initial_s": 0.3, "poll_max_s": 0.6}}),
                      encoding="utf-8")
    scenario = FakeScenario.model_validate({"batch": {"validate_s": 0.5, "delay_s": 3.0}})
    with run_fake_server(scenario) as fake:
        common = {"provider": "fake", "family": "fake", "structured_output": "json_schema",
                  "base_url": fake.base_url, "max_retries": 0}
        models = tmp_path / "models.yaml"
        models.write_text(yaml.safe_dump({"models": {
            "writer": {**common, "model_id": "writer", "batch": "openai",
                       "batch_price_factor": 0.5},
            "judge": {**common, "model_id": "judge"}}}), encoding="utf-8")
        monkeypatch.setenv("ESSAYBENCH_MODELS", str(models))
        result = CliRunner().invoke(app, ["run", "--no-curate", "--config", str(config),
                                          "--store", str(store.root)],
                                    env={"COLUMNS": "200"})
        stats = fake.stats()
    assert result.exit_code == 0, result.output
    waits = [line for line in result.output.splitlines() if line.startswith("batch mode:")]
    assert len(waits) >= 2, result.output  # more than one poll: it really waited
    pattern = (r"batch mode: 5 calls waiting in batch batch_\w+ \(writer: "
               r"(validating|in_progress|finalizing)\); next poll in 0\.[36]s")
    assert all(re.fullmatch(pattern, line) for line in waits), waits
    assert {re.search(r"\((writer: \w+)\)", w).group(1) for w in waits} >= {  # type: ignore[union-attr]
        "writer: in_progress"}
    assert stats.batch is not None and stats.batch.batches_created == 1
    assert "writer" not in stats.per_model  # no essay went direct
