"""``essaybench estimate`` and the budget check of ``run``/``rerun``: the table, one-line
errors with exit code 2, refusal before any request, and a store read but never changed."""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from typer.testing import CliRunner, Result

from essaybench.bench.budget import format_usd
from essaybench.bench.config import load_benchmark_config
from essaybench.cli import app
from essaybench.cli.common import console
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.llm.ledger import Ledger, ledger_row
from essaybench.llm.registry import load_registry
from essaybench.llm.types import CallStatus, ChatResult, Usage
from essaybench.runs.estimate import estimate_run
from essaybench.store import Store

PROMPTS = pl.DataFrame({
    "prompt_id": ["p0", "p1", "p2"],
    "genre": ["argumentative", "narrative", "expository"],
    "prompt_set": ["constrained", "open", "open"],
    "text": ["写一篇不少于500字的议论文，谈谈诚信。", "以“门”为题写一篇记叙文。",
             "介绍一种你熟悉的传统节日。"]})


def published_store(root: Path) -> Store:
    """A store with one published prompt set (ps-test), as curation leaves it."""
    store = Store(root)
    folder = root / "prompt_sets" / "ps-test"
    folder.mkdir(parents=True)
    PROMPTS.write_parquet(folder / "prompts.parquet")
    snapshot = store.write_snapshot("classify", PROMPTS)
    store.record_prompt_set({
        "version": "ps-test", "snapshot_id": snapshot.snapshot_id, "run_id": "curate",
        "n_prompts": PROMPTS.height, "counts": {}, "funnel": {},
        "jsonl_path": "prompt_sets/ps-test/prompts.jsonl",
        "parquet_path": "prompt_sets/ps-test/prompts.parquet"})
    return store


def with_generated_run(store: Store, run_id: str) -> None:
    """A successful generate stage run of ``run_id``: what a rerun from judge reads."""
    essays = PROMPTS.select("prompt_id", "genre", "prompt_set").with_columns(
        model=pl.lit("writer"), status=pl.lit("ok"))
    stage_run = store.start_stage_run(run_id, "generate", [], {}, "test")
    snapshot = store.write_snapshot("generate", essays)
    store.finish_stage_run(stage_run, status="ok", snapshot_id=snapshot.snapshot_id)


def write_registry(path: Path, base_url: str) -> Path:
    entry = {"provider": "fake", "base_url": base_url, "family": "fake",
             "structured_output": "json_schema", "max_concurrency": 4,
             "price_input_per_mtok": 1.0, "price_output_per_mtok": 2.0,
             "default_params": {"max_tokens": 800}, "timeout_s": 5, "max_retries": 0}
    path.write_text(yaml.safe_dump({"models": {
        "writer": {**entry, "model_id": "writer", "rpm": 30},
        "judge": {**entry, "model_id": "judge", "tpm": 100000}}}), encoding="utf-8")
    return path


def write_config(path: Path, **extra: Any) -> Path:
    config = {"prompt_set": "latest", "generate": {"models": ["writer"], "samples": 2},
              "judge": {"judges": ["judge"], "max_tokens": 600}, **extra}
    path.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    return path


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServerHandle]:
    """The fake server, and $ESSAYBENCH_MODELS naming a registry whose models it serves."""
    with run_fake_server() as fake:
        monkeypatch.setenv("ESSAYBENCH_MODELS",
                           str(write_registry(tmp_path / "models.yaml", fake.base_url)))
        yield fake


@pytest.fixture
def pipeline_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Stands in for flows.pipeline (no Prefect): records each call, prints a marker."""
    calls: list[tuple[Any, ...]] = []

    def pipeline_flow(*args: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append(args)
        print("PIPELINE STARTED")
        return {"run_id": "r-test", "reports": str(Path(args[2]) / "reports" / "r-test")}

    stub = types.ModuleType("essaybench.flows.pipeline")
    stub.pipeline_flow = pipeline_flow  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "essaybench.flows.pipeline", stub)
    return calls


def files_of(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


def one_line_error(result: Result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.fixture(autouse=True)
def eighty_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's console 80 columns wide whatever terminal runs the tests: rich read
    $COLUMNS (or the terminal's width) once, when the console was made."""
    monkeypatch.setattr(console, "_width", 80)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), terminal_width=80)


def budget_line(out: str) -> str:
    """The one line saying how the estimate compares with max_cost_usd."""
    lines = [line for line in out.splitlines() if "max_cost_usd $" in line]
    assert len(lines) == 1, out
    return lines[0]


def test_estimate_prints_every_model_and_stage_and_changes_nothing(
        tmp_path: Path, server: FakeServerHandle) -> None:
    store = published_store(tmp_path / "store")
    done = ChatResult(key="k1", model="writer", status=CallStatus.OK, usage=Usage(90, 700),
                      latency_s=3.0, attempts=1, stage="generate",
                      finished_at=datetime(2025, 1, 6, tzinfo=UTC))
    with Ledger(store.root / "ledger.duckdb") as ledger:
        ledger.write_rows([ledger_row(done, endpoint="x", model_id="writer", request="{}")])
    config = write_config(tmp_path / "bench.yaml", max_cost_usd=0.001)
    before = files_of(store.root)

    result = invoke("estimate", "--config", str(config), "--store", str(store.root))

    assert result.exit_code == 0, result.output
    expected = estimate_run(store.root, load_benchmark_config(config), load_registry())
    assert expected.cost_usd is not None and expected.cost_usd > 0.001
    out = result.stdout
    assert "3 prompts of ps-test" in out
    # The judge also re-scores the 24 anchors of the drift check.
    for model, stage, calls in (("writer", "generate", 6), ("judge", "judge", 6),
                                ("judge", "drift", 24)):
        assert any(line.split()[:3] == [model, stage, str(calls)] for line in out.splitlines())
    total = next(line for line in out.splitlines() if line.strip().startswith("total"))
    assert total.split()[1:2] == ["36"] and format_usd(expected.cost_usd) in total
    assert "writer/generate (1 calls)" in " ".join(out.split())  # the ledger's statistics
    # Said, not refused (estimate only reports), on one line that names the config whole
    # (the terminal wraps it, so it copies as one line); the rest fits 80 columns.
    said = budget_line(out)
    assert said.startswith("estimated cost") and "exceeds max_cost_usd" in said
    assert said.endswith(f"({config}): run and rerun refuse it without --yes-over-budget")
    assert max(len(line) for line in out.splitlines() if line != said) <= 80
    assert files_of(store.root) == before  # read-only: not a byte, not a lock file
    assert server.stats().totals.received == 0


def test_estimate_of_a_missing_store_creates_nothing(tmp_path: Path,
                                                     server: FakeServerHandle) -> None:
    config = write_config(tmp_path / "bench.yaml")
    missing = tmp_path / "no" / "store"
    line = one_line_error(invoke("estimate", "--config", str(config), "--store", str(missing)))
    assert str(missing) in line
    assert not (tmp_path / "no").exists()

    empty = tmp_path / "empty"
    empty.mkdir()
    line = one_line_error(invoke("estimate", "--config", str(config), "--store", str(empty)))
    assert "no catalog" in line and str(empty) in line
    assert list(empty.iterdir()) == []


def test_estimate_names_a_missing_prompt_set_or_model(tmp_path: Path,
                                                      server: FakeServerHandle) -> None:
    store = published_store(tmp_path / "store")
    config = write_config(tmp_path / "bench.yaml", prompt_set="ps-nowhere")
    line = one_line_error(invoke("estimate", "--config", str(config), "--store", str(store.root)))
    assert "'ps-nowhere'" in line and str(store.root) in line
    config = write_config(tmp_path / "bench.yaml", judge={"judges": ["nobody"]})
    line = one_line_error(invoke("estimate", "--config", str(config), "--store", str(store.root)))
    assert "no model named 'nobody'" in line


def test_max_cost_usd_is_validated(tmp_path: Path, server: FakeServerHandle) -> None:
    store = published_store(tmp_path / "store")
    config = write_config(tmp_path / "bench.yaml", max_cost_usd=-1)
    line = one_line_error(invoke("estimate", "--config", str(config), "--store", str(store.root)))
    assert "bench.yaml" in line and "max_cost_usd" in line


@pytest.mark.parametrize("command", [["run", "--no-curate"],
                                     ["rerun", "--run", "r0", "--stage", "judge"]])
def test_over_budget_is_refused_before_any_request(tmp_path: Path, server: FakeServerHandle,
                                                   command: list[str]) -> None:
    store = published_store(tmp_path / "store")
    with_generated_run(store, "r0")
    config = write_config(tmp_path / "bench.yaml", max_cost_usd=0.0001)

    result = invoke(*command, "--config", str(config), "--store", str(store.root))

    line = one_line_error(result)
    assert "exceeds max_cost_usd $0.0001" in line and "--yes-over-budget" in line
    assert "Estimate before any call" in result.stdout  # printed first
    assert server.stats().totals.received == 0
    assert not (store.root / "ledger.duckdb").exists()


def test_yes_over_budget_goes_on_after_the_estimate(
        tmp_path: Path, server: FakeServerHandle, pipeline_calls: list[tuple[Any, ...]]) -> None:
    store = published_store(tmp_path / "store")
    config = write_config(tmp_path / "bench.yaml", max_cost_usd=0.0001)
    result = invoke("run", "--no-curate", "--yes-over-budget", "--config", str(config),
                    "--store", str(store.root))
    assert result.exit_code == 0, result.output
    assert len(pipeline_calls) == 1
    out = result.stdout
    # One line however narrow the terminal, the path unbroken: the terminal wraps it.
    said = budget_line(out)
    assert re.fullmatch(rf"estimated cost \$[0-9.]+ exceeds max_cost_usd \$0\.0001 "
                        rf"\({re.escape(str(config))}\): going on \(--yes-over-budget\)", said)
    assert out.index("Estimate before any call") < out.index(said) \
        < out.index("PIPELINE STARTED")


def test_within_budget_runs_and_rerun_estimates_its_own_stages(
        tmp_path: Path, server: FakeServerHandle, pipeline_calls: list[tuple[Any, ...]]) -> None:
    store = published_store(tmp_path / "store")
    config = write_config(tmp_path / "bench.yaml", max_cost_usd=100)
    result = invoke("run", "--no-curate", "--config", str(config), "--store", str(store.root))
    assert result.exit_code == 0, result.output
    assert "within max_cost_usd $100.00" in result.stdout and len(pipeline_calls) == 1

    with_generated_run(store, "r0")
    result = invoke("rerun", "--run", "r0", "--stage", "judge", "--config", str(config),
                    "--store", str(store.root))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert not any(line.split()[:2] == ["writer", "generate"] for line in lines)
    assert any(line.split()[:2] == ["judge", "judge"] for line in lines)
    assert "an upper bound" in result.stdout and len(pipeline_calls) == 2


def test_a_cap_without_an_estimate_is_refused(
        tmp_path: Path, server: FakeServerHandle, pipeline_calls: list[tuple[Any, ...]]) -> None:
    """A first run curates first: nothing to estimate on yet. With a cap that cannot be
    checked it refuses; without a cap it says so and goes on."""
    store = tmp_path / "fresh"
    capped = write_config(tmp_path / "capped.yaml", max_cost_usd=5)
    line = one_line_error(invoke("run", "--config", str(capped), "--store", str(store)))
    assert "cannot be checked" in line and pipeline_calls == []
    assert not store.exists()

    uncapped = write_config(tmp_path / "uncapped.yaml")
    result = invoke("run", "--config", str(uncapped), "--store", str(store))
    assert result.exit_code == 0, result.output
    assert "no estimate: no store at" in result.stdout and len(pipeline_calls) == 1


def test_a_run_checks_its_own_budget_before_any_call(tmp_path: Path,
                                                     server: FakeServerHandle) -> None:
    """A scheduled run has no CLI in front of it: the pipeline refuses by itself."""
    from prefect.client.schemas.objects import State

    from essaybench.flows.pipeline import pipeline_flow
    from essaybench.runs.estimate import OverBudget

    store = published_store(tmp_path / "store")
    config = write_config(tmp_path / "bench.yaml", max_cost_usd=0.0001)
    # A refusal is the flow run's Failed state with the refusal's own message (issue 25
    # item 4), not a crash.
    state = pipeline_flow.fn(str(config), str(config), str(store.root), False)
    assert isinstance(state, State) and state.is_failed(), state
    assert "exceeds max_cost_usd $0.0001" in (state.message or ""), state.message
    assert isinstance(state.data, OverBudget)
    assert server.stats().totals.received == 0
    assert not (store.root / "ledger.duckdb").exists()
    # The same check passes a run within its cap (and skips one without a cap).
    from essaybench.runs.estimate import require_within_budget

    within = load_benchmark_config(write_config(tmp_path / "ok.yaml", max_cost_usd=1000.0))
    assert require_within_budget(store.root, within, load_registry(), "generate") is not None
    uncapped = load_benchmark_config(write_config(tmp_path / "free.yaml"))
    assert require_within_budget(store.root, uncapped, load_registry(), "generate") is None
