"""benchmarks/cost_at_equal_power.py: its cost arithmetic, its simulated truths, and a
two-week run that prints both verdicts (skipped without WritingPreferenceBench)."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from benchmarks import heavy_tail_sim as hts
from benchmarks.cost_at_equal_power import main, per_prompt_cost, simulate_week

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
def test_two_weeks_print_both_verdicts(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--weeks", "2", "--prompts", "160", "--round-size", "40"])
    out = capsys.readouterr().out
    assert code in (0, 1)
    assert out.count("PASS") + out.count("FAIL") == 2
    assert "wrong separated claims" in out
