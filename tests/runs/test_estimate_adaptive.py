"""The estimate of an adaptive run (runs/estimate_adaptive.py) and ``essaybench estimate``'s
adaptive lines, on the bundled prompt set: the maximum and minimum are the estimates of
the order's prefixes (checked against the floor found by brute force and the plain
estimate of the same prompts); the expected figure appears only once the store holds an
adaptive run, and is that run's share of prompts."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from essaybench.bench.adaptive_order import adaptive_order
from essaybench.bench.adaptive_scores import strata_of
from essaybench.bench.config import BenchmarkConfig, select_prompts
from essaybench.bench.estimate import estimate_benchmark
from essaybench.cli import app
from essaybench.cli.common import console
from essaybench.llm.fake.server import run_fake_server
from essaybench.runs.estimate import read_prompt_set
from essaybench.runs.estimate_adaptive import estimate_adaptive
from essaybench.stages.pipeline import run_stages
from essaybench.store import Store
from tests.stages.adaptive_fixtures import MARKS, config_yaml, registry, registry_yaml, scenario

SAMPLING = {"mode": "adaptive", "round_size": 4, "floor_per_stratum": 2}


def _config(**sampling: object) -> BenchmarkConfig:
    return BenchmarkConfig.model_validate(config_yaml({**SAMPLING, **sampling}))


def _floor_prefix(strata: list[str], floor: int) -> int:
    sizes = Counter(strata)
    for n in range(len(strata) + 1):
        have = Counter(strata[:n])
        if all(have[s] >= min(floor, k) for s, k in sizes.items()):
            return n
    raise AssertionError("unreachable")


def test_full_mode_has_no_adaptive_figures(curated: Store) -> None:
    reg = registry("http://fake.invalid/v1")
    assert estimate_adaptive(curated.root, _config(mode="full"), reg) is None


def test_maximum_and_minimum_are_the_estimates_of_the_orders_prefixes(curated: Store) -> None:
    reg = registry("http://fake.invalid/v1")
    config = _config(max_prompts=120)
    got = estimate_adaptive(curated.root, config, reg, history=False)
    assert got is not None and got.expected is None and "no adaptive run" in got.expected_from
    version, prompts = read_prompt_set(curated.root, "latest")
    selected = select_prompts(prompts, None, 0)
    order = adaptive_order(strata_of(selected), config.sampling)
    floor = _floor_prefix(list(order.strata), 2)
    rounded = -(-floor // 4) * 4  # the run looks at round ends only
    assert rounded < 120 and (got.of, got.max_prompts, got.min_prompts) == (
        selected.height, 120, rounded)
    for n, est in ((120, got.maximum), (rounded, got.minimum)):
        prefix = selected.filter(pl.col("prompt_id").is_in(list(order.prompt_ids[:n])))
        plain = estimate_benchmark(prefix, config, reg, {}, prompt_set=version)
        assert (est.n_prompts, est.calls, est.cost_usd) == (n, plain.calls, plain.cost_usd)
        writer_calls = sum(r.calls for r in est.rows if r.stage == "generate")
        assert writer_calls == n * len(MARKS)
    # max_calls caps too, in planned calls: 3 writers × (1 essay + 1 judgment) a prompt
    capped = estimate_adaptive(curated.root, _config(max_calls=6 * 30), reg, history=False)
    assert capped is not None and capped.max_prompts == 30


def test_the_expected_figure_is_the_newest_adaptive_runs_share(
        curated_copy: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config()
    with run_fake_server(scenario()) as server:
        snaps = run_stages(curated_copy, "a1", config, ["generate", "judge", "aggregate"],
                           None, registry=registry(server.base_url))
        sampled = snaps["adaptive"].meta["sampled"]
        got = estimate_adaptive(curated_copy.root, config, registry(server.base_url))
        assert got is not None and got.expected is not None
        assert got.expected_prompts == sampled and "a1" in got.expected_from
        assert got.min_prompts <= sampled <= got.max_prompts
        # estimate --check compares the run with the estimate of the prompts it sampled
        from essaybench.runs.estimate_check import check_run

        report = check_run(curated_copy.root, "a1", config, registry(server.base_url))
        writers = [r for r in report.rows if r.stage == "generate"]
        assert len(writers) == len(MARKS)
        assert all(r.estimated["calls"] == r.actual["calls"] == sampled for r in writers)
        # the CLI prints the figures next to the full selection's
        monkeypatch.setattr(console, "_width", 80)
        models = tmp_path / "models.yaml"
        models.write_text(yaml.safe_dump(registry_yaml(server.base_url)), encoding="utf-8")
        monkeypatch.setenv("ESSAYBENCH_MODELS", str(models))
        bench = tmp_path / "benchmark.yaml"
        bench.write_text(yaml.safe_dump(config_yaml(SAMPLING)), encoding="utf-8")
        result = CliRunner().invoke(app, ["estimate", "--config", str(bench), "--store",
                                          str(curated_copy.root)], terminal_width=80)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Adaptive sampling (sampling: mode: adaptive)" in out
    assert f"expected: {sampled} of {got.of} prompts, {got.expected.calls:,} calls" in out
    assert f"full (every selected prompt): {got.of} of {got.of} prompts" in out


def test_the_budget_is_checked_against_what_an_adaptive_run_can_ask_for(
        curated: Store) -> None:
    from essaybench.runs.estimate import OverBudget, estimate_run, require_within_budget

    reg = registry("http://fake.invalid/v1")
    adaptive = _config(max_prompts=40)
    full = estimate_run(curated.root, adaptive, reg, history=False)
    capped = estimate_run(curated.root, adaptive, reg, history=False, adaptive_cap=True)
    assert capped.n_prompts == 40 and full.n_prompts > 40
    assert any("at most 40 of these" in note for note in capped.assumptions)
    assert capped.cost_usd is not None and full.cost_usd is not None
    cap = (capped.cost_usd + full.cost_usd) / 2  # the maximum fits; every prompt would not
    within = adaptive.model_copy(update={"max_cost_usd": cap})
    checked = require_within_budget(curated.root, within, reg, "generate")
    assert checked is not None and checked.n_prompts == 40
    as_full = within.model_copy(update={"sampling": within.sampling.model_copy(
        update={"mode": "full"})})
    with pytest.raises(OverBudget):
        require_within_budget(curated.root, as_full, reg, "generate")
