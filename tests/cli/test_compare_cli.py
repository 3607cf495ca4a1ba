"""``essaybench compare``: the default baseline is the alerts stage's (a judge-down or
drifted week is passed over, with why), the command says which run it chose and why, and
a wrong ``--score`` is one line (issue 25, items 1 and 17)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from essaybench.core.contracts import StageOutput
from essaybench.store import Store
from essaybench.store.run_stage import run_stage
from tests.cli.test_errors import error_line, invoke
from tests.runs.test_comparable import add_run, frames


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def compare(store: Store, *args: str) -> tuple[str, pl.DataFrame | None]:
    result = invoke("compare", *args, "--store", str(store.root))
    assert result.exit_code == 0, (result.output, result.exception)
    run, base = args[1], result.output.split("baseline: ")[1].split()[0].rstrip(",")
    table = store.root / "reports" / run / f"compare_{base}.parquet"
    return result.output, pl.read_parquet(table) if table.is_file() else None


def test_a_judge_down_week_is_passed_over_and_the_choice_is_explained(store: Store) -> None:
    add_run(store, "w1")
    add_run(store, "w2", healthy=False)  # judge down: 0% coverage
    add_run(store, "w3")
    out, table = compare(store, "--run", "w3")
    assert "baseline: w1, the newest earlier run with the same judges and rubric" in out
    assert "passed over 1: w2: unhealthy: 1 of 1" in out
    assert table is not None and table["n_common_prompts"].to_list() == [3]
    assert table["delta"].to_list() == [0.0]


def test_a_drifted_week_is_passed_over(store: Store) -> None:
    add_run(store, "w1")
    add_run(store, "w2", drifted=True)
    add_run(store, "w3")
    out, _ = compare(store, "--run", "w3")
    assert "baseline: w1," in out
    assert "w2: judge judge failed its anchor check in that run" in out


def test_a_rerun_is_compared_with_its_original_runs_baseline(store: Store) -> None:
    for week in ("w1", "w2", "w3"):
        add_run(store, week)
    add_run(store, "w2-rerun", base_run="w2")
    out, _ = compare(store, "--run", "w2-rerun")
    assert "baseline: w1 (the baseline of w2, the run w2-rerun reruns)" in out


def test_a_given_base_is_used_and_said_not_comparable(store: Store) -> None:
    add_run(store, "w1")
    add_run(store, "w2", healthy=False)
    add_run(store, "w3")
    out, table = compare(store, "--run", "w3", "--base", "w2")
    assert "baseline: w2 (given with --base), NOT comparable by the rule alerts use: " \
           "unhealthy" in out
    assert table is not None


def test_no_comparable_run_and_a_bogus_score_are_one_line(store: Store) -> None:
    add_run(store, "w1", judge="other")
    add_run(store, "w2")
    line = error_line(invoke("compare", "--run", "w2", "--store", str(store.root)))
    assert line == ("error: no run to compare w2 with (baseline: none: 1 earlier run(s), none "
                    "comparable: w1: other judges (other)); name one with --base RUN")
    line = error_line(invoke("compare", "--run", "w2", "--base", "w1", "--score", "bogus",
                             "--store", str(store.root)))
    assert line == ("error: invalid value for --score: 'bogus': one of score_weighted, "
                    "score_unweighted, align_total")


def steered_run(store: Store, run_id: str, rule: str) -> None:
    """Like ``add_run``, but every essay told the first judge to give full marks (it gave
    100, flagged) and the second judge scored it 40; the leaderboard's stats stage
    recorded ``rule``."""
    add_run(store, run_id)  # catalog rows, health
    essays, judged = frames(run_id)
    judged = judged.with_columns(pl.lit(100.0).alias("score_weighted"),
                                 pl.lit('["instruction"]').alias("essay_flags"),
                                 pl.lit("ok").alias("second_status"),
                                 pl.lit(40.0).alias("second_score"),
                                 pl.lit("judge-2").alias("second_judge"),
                                 pl.lit(f"{run_id} steered").alias("note"))
    gen = run_stage(store, run_id=run_id, stage="generate", upstream=[], params=None,
                    compute=lambda: StageOutput(essays))
    run_stage(store, run_id=run_id, stage="judge", upstream=[gen], params=None,
              compute=lambda: StageOutput(judged))
    sid = store.start_stage_run(run_id, "stats", [], {}, "test")
    store.finish_stage_run(sid, status="ok", meta={"flagged_essays": rule})


@pytest.mark.parametrize(("rule", "delta"), [("second_opinion", 40.0 - 61.0),
                                            ("first_judge", 100.0 - 61.0)])
def test_flagged_essays_are_compared_as_the_runs_leaderboard_ranked_them(
        store: Store, rule: str, delta: float) -> None:
    add_run(store, "w1")  # scores 60, 61, 62
    steered_run(store, "w2", rule)
    out, table = compare(store, "--run", "w2")
    assert f"flagged essays in both runs as on w2's leaderboard (flagged_essays {rule})" in out
    assert table is not None
    assert table["delta"].to_list() == [pytest.approx(delta)]


def test_a_baseline_with_fewer_prompts_compares_the_common_ones(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28: w1 scored 7 prompts, w2 the same 7 (the same scores) and 3 more. The
    change and its interval are both over the 7 common prompts: 0 in [0, 0], not the
    whole-run means' +1.5 beside an interval of [0, 0]."""
    from essaybench.cli.common import console

    monkeypatch.setattr(console, "_width", 120)
    add_run(store, "w1", prompts=tuple(f"p{i}" for i in range(7)))  # 60..66: mean 63
    add_run(store, "w2", prompts=tuple(f"p{i}" for i in range(10)))  # 60..69: mean 64.5
    out, table = compare(store, "--run", "w2")
    assert table is not None
    row = table.row(0, named=True)
    assert row["n_common_prompts"] == 7
    assert row["mean_now"] - row["mean_before"] == pytest.approx(1.5)  # whole runs, apart
    assert (row["delta"], row["delta_lo"], row["delta_hi"]) == (0.0, 0.0, 0.0)
    assert row["common_mean_now"] == row["common_mean_before"] == pytest.approx(63.0)
    [line] = [ln for ln in out.splitlines() if "writer" in ln]
    cells = [c.strip() for c in line.strip("│ ").split("│")]
    assert cells == ["judge", "writer", "63.000", "63.000", "0.000", "0.000", "0.000", "7",
                     "—"]
    assert "over the prompts both runs scored" in out
