"""Agreement between judges (issue 28 item 3) against scipy: Spearman's ρ per essay and per
leaderboard, and the disagreement list's percentile gaps (scipy.stats.percentileofscore)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats

from essaybench.stats.judge_agreement import (
    disagreements,
    essay_agreement,
    leaderboard_agreement,
    spearman,
)


def _scores(rng: np.random.Generator, n: int = 40) -> pl.DataFrame:
    """Two judges on n essays: j2 ≈ j1 squeezed into 60–90 plus noise, rounded (ties);
    j2 failed on essays 0 and 1, j1 on essay 2."""
    base = rng.normal(60, 12, n).round()
    j2 = (60 + 0.3 * (base - 40) + rng.normal(0, 4, n)).round()
    rows = []
    for i in range(n):
        for judge, value in (("j1", base[i]), ("j2", j2[i])):
            failed = (judge == "j2" and i < 2) or (judge == "j1" and i == 2)
            rows.append({"judge": judge, "prompt_id": f"p{i // 2}", "model": f"m{i % 2}",
                         "sample_index": 0, "score": None if failed else float(value)})
    return pl.DataFrame(rows)


def test_spearman_is_scipys_with_ties_and_none_when_it_says_nothing() -> None:
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 5, 30).astype(float), rng.integers(0, 5, 30).astype(float)
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, rel=1e-12)
    assert spearman([1.0, 2.0], [2.0, 1.0]) is None  # too few
    assert spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None  # no spread


def test_essay_agreement_over_the_essays_both_judges_scored() -> None:
    scores = _scores(np.random.default_rng(2))
    [row] = essay_agreement(scores).to_dicts()
    wide = scores.pivot(on="judge", index=["prompt_id", "model", "sample_index"],
                        values="score").drop_nulls()
    assert (row["judge_a"], row["judge_b"], row["n_essays"]) == ("j1", "j2", 37)
    expected = stats.spearmanr(wide["j1"].to_numpy(), wide["j2"].to_numpy()).statistic
    assert row["spearman_rho"] == pytest.approx(expected, rel=1e-12)
    assert 0.5 < row["spearman_rho"] < 1  # related, not identical
    assert row["mean_abs_diff"] == pytest.approx(
        float(np.mean(np.abs(wide["j1"].to_numpy() - wide["j2"].to_numpy()))))


def test_leaderboard_agreement_is_spearman_over_common_models() -> None:
    boards: dict[str, dict[str, float | None]] = {
        "j1": {"a": 80.0, "b": 70.0, "c": 60.0, "d": 65.0, "e": None},
        "j2": {"a": 75.0, "b": 76.0, "c": 50.0, "d": 55.0, "f": 90.0}}
    [row] = leaderboard_agreement(boards).to_dicts()
    assert row["n_models"] == 4
    assert row["spearman_rho"] == pytest.approx(
        stats.spearmanr([80, 70, 60, 65], [75, 76, 50, 55]).statistic)


def test_disagreements_rank_essays_by_their_percentile_gap() -> None:
    scores = _scores(np.random.default_rng(3))
    found = disagreements(scores, top=5)
    wide = scores.pivot(on="judge", index=["prompt_id", "model", "sample_index"],
                        values="score").drop_nulls()
    j1, j2 = wide["j1"].to_numpy(), wide["j2"].to_numpy()
    gaps = np.abs(np.array([stats.percentileofscore(j1, v, kind="mean") for v in j1])
                  - np.array([stats.percentileofscore(j2, v, kind="mean") for v in j2]))
    assert found.height == 5
    assert found["gap"].to_list() == pytest.approx(sorted(gaps, reverse=True)[:5])
    top = found.row(0, named=True)
    i = next(k for k, r in enumerate(wide.iter_rows(named=True))
             if (r["prompt_id"], r["model"]) == (top["prompt_id"], top["model"]))
    assert (top["score:j1"], top["score:j2"]) == (j1[i], j2[i])
    assert top["pct:j1"] == pytest.approx(stats.percentileofscore(j1, j1[i], kind="mean"))
    one_judge = scores.filter(pl.col("judge") == "j1")
    assert disagreements(one_judge).height == 0
    assert essay_agreement(one_judge).height == 0
