"""benchmarks/cost_at_equal_power.py: its cost arithmetic and registry prices, its
simulated truths, the oracle bound's edge cases, the --e2e hook, and a two-week run that
prints both verdicts (skipped without WritingPreferenceBench)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
import yaml

from benchmarks import heavy_tail_sim as hts
from benchmarks.cost_at_equal_power import (
    REGISTRY,
    Design,
    e2e,
    full_decisions,
    main,
    make_week,
    oracle_bound,
    per_prompt_cost,
    registry_prices,
    simulate_week,
)

needs_data = pytest.mark.skipif(hts.missing_reason() is not None,
                                reason=hts.missing_reason() or "")


def test_per_prompt_cost_by_hand() -> None:
    args = argparse.Namespace(
        writer_in=1.0, writer_out=2.0, judge_in=3.0, judge_cached_in=0.5, judge_out=4.0,
        batch_factor=0.5, judges=2, writer_in_tokens=100, writer_out_tokens=1000,
        judge_rubric_tokens=2000, judge_rest_tokens=1000, judge_out_tokens=500)
    writer = 100 * 1.0 + 1000 * 2.0
    judge_list = 2000 * 3.0 + 1000 * 3.0 + 500 * 4.0
    judge_cached = 2000 * 0.5 + 1000 * 3.0 + 500 * 4.0
    assert per_prompt_cost(args, 3, batch=False, cache=False) == pytest.approx(
        3 * (writer + 2 * judge_list) / 1e6)
    assert per_prompt_cost(args, 3, batch=True, cache=True) == pytest.approx(
        0.5 * 3 * (writer + 2 * judge_cached) / 1e6)
    args.writer_batch, args.judge_batch = 0.5, 0.25  # each side its own factor
    assert per_prompt_cost(args, 3, batch=True, cache=False) == pytest.approx(
        3 * (0.5 * writer + 0.25 * 2 * judge_list) / 1e6)


def test_registry_prices_are_the_example_files() -> None:
    """Read the YAML directly: the writer's batch factor, the judge's off-peak factor
    (it has no batch factor), the judge's cached-input price."""
    models = yaml.safe_load(REGISTRY.read_text(encoding="utf-8"))["models"]
    w, j = models["gpt-4o-mini"], models["deepseek-chat"]
    p = registry_prices()
    assert (p.writer_in, p.writer_out) == (w["price_input_per_mtok"],
                                           w["price_output_per_mtok"])
    assert p.writer_batch == w["batch_price_factor"]
    assert "batch_price_factor" not in j and p.judge_batch == j["off_peak"]["price_factor"]
    assert p.judge_cached_in == j["price_cached_input_per_mtok"] < p.judge_in


def test_e2e_hook(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert e2e([], tmp_path / "_cost_e2e.py") == 2
    assert "not available" in capsys.readouterr().out
    module = tmp_path / "_cost_e2e.py"
    module.write_text("def main(argv):\n    print('e2e', argv)\n    return 0\n",
                      encoding="utf-8")
    assert e2e(["--weeks", "1"], module) == 0
    assert "e2e ['--weeks', '1']" in capsys.readouterr().out


def test_main_hands_every_other_option_to_the_e2e_module(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """--e2e anywhere: the remaining options (its own, unknown here) go to the module."""
    from benchmarks import cost_at_equal_power as cost

    seen: list[list[str]] = []

    def fake_e2e(argv: list[str]) -> int:
        seen.append(argv)
        return 3

    monkeypatch.setattr(cost, "e2e", fake_e2e)
    assert cost.main(["--weeks", "5", "--e2e", "--workdir", "w"]) == 3
    assert seen == [["--weeks", "5", "--workdir", "w"]]


@needs_data
def test_simulated_week_has_a_clone_and_two_changes() -> None:
    pop = hts.load_population()
    this, last, pairs, changes = simulate_week(np.random.default_rng(0), pop, 300)
    assert this.shape == last.shape == (300, 9)
    assert pairs.shape == (36,) and changes.shape == (9,)
    assert np.count_nonzero(changes) == 2 and (np.abs(changes[changes != 0]) > 2).all()
    assert np.count_nonzero(pairs == 0) == 1  # the clone pair only
    assert 0.01 < np.isnan(this).mean() < 0.06  # failed judgments, not imputed


@needs_data
def test_oracle_bound_edges() -> None:
    """Nothing unseen: the full factorial's decisions are known (bound 1). Everything
    unseen: the bound is the most frequent decision vector's share, which for the 36
    pairs (gaps of 0.2–3 points among real models) is far below 1."""
    pop = hts.load_population()
    rng = np.random.default_rng(5)
    week = make_week(rng, pop)
    this, last = week.draw(rng, 200)
    args = argparse.Namespace(prompts=200, alpha=0.05)
    design = Design("t", ask="pairs", min_effect=3.0)
    assert oracle_bound(rng, week, this, last, 200, args, design, 5) == 1.0
    tuned = Design("cs", ask="pairs", min_effect=3.0, horizon=100, truncation=0.9, grid=201)
    assert oracle_bound(rng, week, this, last, 200, args, tuned, 3, comparator="cs") == 1.0
    low = oracle_bound(rng, week, this, last, 0, args, design, 40)
    assert 0 < low < 0.5
    codes = full_decisions(this, last, 0.05, 3.0)
    assert codes.shape == (45,) and set(codes.tolist()) <= {0, 1, 2, 3}


@needs_data
def test_two_weeks_print_both_verdicts(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--weeks", "2", "--prompts", "160", "--round-size", "40", "--oracle", "3",
                 "--null-reps", "20",
                 "--oracle-weeks", "1", "--grid", "201"])
    out = capsys.readouterr().out
    assert code in (0, 1)
    assert out.count("PASS") + out.count("FAIL") == 2
    assert "wrong separated claims" in out and "oracle bound (pairs" in out
    assert "clone pair (equal means) over 20 null weeks" in out and "closest honest" in out
