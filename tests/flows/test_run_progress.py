"""``essaybench run`` piped (CI logs, issue 14 item 3): progress lines per stage and
model on stdout while the flow runs, and Table 5 as a rich table, not Markdown pipes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from essaybench.cli import app
from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.progress import TextReporter, current_progress

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_engine")]


def test_a_piped_run_prints_progress_lines_and_a_rich_table5(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registry, store, config = tmp_path / "models.yaml", tmp_path / "store", \
        tmp_path / "benchmark.yaml"
    config.write_text(yaml.safe_dump({"per_genre": 2, "generate": {"models": ["writer"]},
                                      "judge": {"judges": ["judge"]},
                                      "drift": None}), encoding="utf-8")
    monkeypatch.setenv("ESSAYBENCH_MODELS", str(registry))
    with run_fake_server() as server:
        common = {"provider": "fake", "family": "fake", "structured_output": "json_schema",
                  "base_url": server.base_url, "max_concurrency": 4, "timeout_s": 60}
        registry.write_text(yaml.safe_dump({"models": {
            "writer": {**common, "model_id": "writer"},
            "judge": {**common, "model_id": "judge"}}}), encoding="utf-8")
        out = CliRunner().invoke(app, [
            "run", "--config", str(config), "--store", str(store),
            "--curate-config", str(PROJECT_ROOT / "configs" / "curate.yaml")])
    text = out.output
    assert out.exit_code == 0, text
    progress = [line for line in text.splitlines() if line.startswith("progress: ")]
    # The waiting message names the endpoints the calls go to (the fake server's), not
    # the embedded model's slowness.
    [label] = [line for line in text.splitlines() if "(progress every" in line]
    assert label.startswith("generating and judging (calls to 127.0.0.1:"), label
    assert "embedded" not in label
    # One line per batch at least (the fake server is fast: the batch-end line), each
    # naming the stage that runs, with done/total, ok/failed and tokens per stage and
    # model, elapsed, and "calls done" (no "ETA 0s" while the stage still runs).
    # per_genre 2: 8 essays of the four genres, judged while generating, and 2 of prompts
    # that leave the genre open: the judge stage asks their genre (2 calls), then judges
    # them (2 calls): the two batches' end lines
    assert any(re.match(r"progress: stage generate running \d+s; generate writer 10/10 "
                        r"\(ok 10, failed 0, [\d,]+ tokens\).*; elapsed \d+s, calls done$",
                        line) for line in progress), text
    assert any(re.search(r"; judge judge 8/8 \(ok 8, failed 0, [\d,]+ tokens\)", line)
               for line in progress), text
    assert sum(bool(re.match(r"progress: stage judge running \d+s; judge judge 2/2 \(ok 2, "
                             r"failed 0, [\d,]+ tokens\)", line)) for line in progress) >= 2, text
    # Each stage is named as it starts, those without calls too.
    started = [line.removeprefix("progress: stage ").removesuffix(" started")
               for line in progress if line.endswith(" started")]
    assert [s for s in started if s in ("generate", "judge", "aggregate", "stats", "alerts",
                                        "report")] == [
        "generate", "judge", "aggregate", "stats", "alerts", "report"], text
    assert re.search(r"│ judge\s+│ writer\s+│\s+\d+\.\d\d \[2 chosen\]", text), text
    # Table 5 is a rich table (box-drawn), never the Markdown file's pipes.
    assert "Table 5: weighted score" in text
    assert "| judge | model |" not in text and "|---|" not in text
    assert re.search(r"│ judge\s+│ writer\s+│\s+\d+\.\d\d", text), text
    # Sized to the terminal (CliRunner's: 80 columns): no line wider, every cell shown.
    assert all(len(line) <= 80 for line in text.splitlines()
               if line.startswith(("┏", "│", "└"))), text
    for cell in ("overall", "argumentative", "narrative", "descriptive", "expository"):
        assert f"┃ {cell}" in text or f"{cell} ┃" in text, text
    # The command put the process's observer back: the default text reporter.
    assert isinstance(current_progress(), TextReporter)
