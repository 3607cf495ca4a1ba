"""``essaybench estimate --check RUN`` against a run made on the fake server (real HTTP on
loopback, the real ledger file), and the estimate without history within 1.5x of what a
run used (issue 26 item 5): calls, tokens and cost per model and stage, the wall-time
lower bound never above the actual."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import yaml

from benchmarks.estimate_accuracy import PROSE, compliant_length, fake_scenario
from essaybench.bench.config import BenchmarkConfig, load_benchmark_config, select_prompts
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.registry import load_registry
from essaybench.llm.scope import ReuseScope
from essaybench.llm.session import LEDGER_FILE, open_gateway
from essaybench.runs.estimate import read_prompt_set
from essaybench.runs.estimate_check import check_run
from essaybench.stages.generate import generate_stage
from essaybench.stages.judge import judge_stage
from essaybench.store import Store
from tests.cli.test_estimate_cli import files_of, invoke, one_line_error

WRITERS = ["writer-a", "writer-b"]


@pytest.fixture(autouse=True)
def eighty_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's console 80 columns wide whatever terminal runs the tests."""
    from essaybench.cli.common import console

    monkeypatch.setattr(console, "_width", 80)


def _registry(path: Path, base_url: str) -> Path:
    entry = {"provider": "fake", "base_url": base_url, "family": "fake",
             "structured_output": "json_schema", "max_concurrency": 8,
             "price_input_per_mtok": 1.0, "price_output_per_mtok": 2.0,
             "default_params": {"max_tokens": 1024}, "timeout_s": 10, "max_retries": 0}
    models = {name: {**entry, "model_id": name} for name in [*WRITERS, "judge"]}
    models["judge"]["price_cached_input_per_mtok"] = 0.25  # its provider caches the rubric
    path.write_text(yaml.safe_dump({"models": models}), encoding="utf-8")
    return path


def _config(path: Path) -> Path:
    path.write_text(yaml.safe_dump({
        "prompt_set": "latest", "per_genre": 2, "generate": {"models": WRITERS},
        "judge": {"judges": ["judge"], "judge_prompt": "judge_prompt.v3.yaml",
                  "analysis_max_chars": 60, "max_tokens": 1200}, "drift": None}),
        encoding="utf-8")
    return path


@pytest.fixture
def done_run(curated_copy: Store, tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> tuple[Store, Path, float]:
    """Run r1 (generate, judge while generating, judge) on the fake server, whose writers
    write what their prompt asks for; the store, the config and the run's wall time."""
    import time

    config_path = _config(tmp_path / "bench.yaml")
    config: BenchmarkConfig = load_benchmark_config(config_path)
    _, prompts = read_prompt_set(curated_copy.root, "latest")
    texts = select_prompts(prompts, config.per_genre, config.sample_seed)["text"].to_list()
    with run_fake_server(fake_scenario(texts, WRITERS)) as server:
        monkeypatch.setenv("ESSAYBENCH_MODELS",
                           str(_registry(tmp_path / "models.yaml", server.base_url)))
        registry = load_registry()
        started = time.monotonic()
        with open_gateway(registry, curated_copy.root, list(config.models()),
                          scope=ReuseScope.of_run("r1")) as session:
            gen = generate_stage(curated_copy, "r1", config, session, prefetch_judge=True)
            judge_stage(curated_copy, "r1", config, gen, session)
        wall = time.monotonic() - started
    return curated_copy, config_path, wall


def test_writers_write_what_they_are_asked(curated_copy: Store) -> None:
    """The scenario's writers: the length the prompt asks for, within the seeded spread."""
    assert compliant_length("写一篇不少于800字的记叙文", "w") in range(800, 1121)
    assert compliant_length("写一篇600字左右的短文", "w") in range(540, 661)
    assert compliant_length("写一篇作文", "w") in range(500, 1001)
    assert set(PROSE) - {"，", "。"}  # Chinese prose


def test_estimate_without_history_is_within_1_5x(done_run: tuple[Store, Path, float]) -> None:
    store, config_path, wall = done_run
    report = check_run(store.root, "r1", load_benchmark_config(config_path), load_registry(),
                       history=False)
    # Independently: the run's calls and tokens per (model, stage), read from the ledger.
    with duckdb.connect(str(store.root / LEDGER_FILE), read_only=True) as con:
        made = {(m, s): (n, tin, tout) for m, s, n, tin, tout in con.execute(
            "SELECT model, stage, count(*), sum(input_tokens), sum(output_tokens) "
            "FROM llm_calls WHERE run_id = 'r1' GROUP BY ALL").fetchall()}
    rows = {(r.model, r.stage): r for r in report.rows}
    assert set(made) == {(w, "generate") for w in WRITERS} | {("judge", "judge")}
    for key, (calls, tin, tout) in made.items():
        row = rows[key]
        assert (row.actual["calls"], row.actual["input_tokens"],
                row.actual["output_tokens"]) == (calls, tin, tout)
        assert row.estimated["calls"] == calls  # every essay came back and was judged
        for metric in ("input_tokens", "output_tokens", "cost_cached_usd"):
            ratio = row.ratio(metric)
            assert ratio is not None and 1 / 1.5 <= ratio <= 1.5, (key, metric, ratio)
    assert report.within(1.5)
    # The judge's provider reported its rubric as cached input: the list-price estimate
    # is an upper bound of what was paid, the cached-input estimate close to it.
    judge = rows[("judge", "judge")]
    listed, cached = judge.ratio("cost_usd"), judge.ratio("cost_cached_usd")
    assert listed is not None and cached is not None and listed > 1.5 > cached
    # The lower bound: no history, no rate limit: nothing the run could not beat.
    assert report.wall_s is not None and report.lower_s <= report.wall_s <= wall
    assert report.lower_holds


def test_check_prints_estimate_and_actual_per_model_and_stage(
        done_run: tuple[Store, Path, float]) -> None:
    store, config_path, _ = done_run
    before = files_of(store.root)
    result = invoke("estimate", "--config", str(config_path), "--store", str(store.root),
                    "--check", "r1")
    assert result.exit_code == 0, result.output
    out = result.stdout
    report = check_run(store.root, "r1", load_benchmark_config(config_path), load_registry())
    # One line per model, stage and figure, its ratio last.
    shown: dict[tuple[str, str], str] = {}
    model = ""
    for line in out.splitlines():
        words = line.split()
        if words and words[0] in {*WRITERS, "judge", "total"}:
            model = words[0]
        for figure in ("calls", "input tokens", "output tokens", "USD list", "USD cached"):
            if f" {figure} " in line:
                shown[(model, figure)] = words[-1]
    for row in report.rows:
        for metric, figure in (("calls", "calls"), ("input_tokens", "input tokens"),
                               ("output_tokens", "output tokens"), ("cost_usd", "USD list"),
                               ("cost_cached_usd", "USD cached")):
            ratio = row.ratio(metric)
            assert ratio is not None and shown[(row.model, figure)] == f"{ratio:.2f}x"
    # With history: the ledger's other runs only (none here), so the same as without.
    assert report.rows[-1].ratio("input_tokens") == pytest.approx(check_run(
        store.root, "r1", load_benchmark_config(config_path), load_registry(),
        history=False).rows[-1].ratio("input_tokens"))
    assert "lower bound" in out and "(holds)" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert files_of(store.root) == before  # read-only


def test_a_missing_run_is_one_line(done_run: tuple[Store, Path, float], tmp_path: Path) -> None:
    store, config_path, _ = done_run
    line = one_line_error(invoke("estimate", "--config", str(config_path), "--store",
                                 str(store.root), "--check", "r-nowhere"))
    assert "'r-nowhere'" in line and "no calls" in line
    empty = tmp_path / "empty-store"
    empty.mkdir()
    line = one_line_error(invoke("estimate", "--config", str(config_path), "--store",
                                 str(empty), "--check", "r1"))
    assert "no call ledger" in line and str(empty) in line
