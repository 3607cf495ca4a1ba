"""Ranking by mean with t-intervals on prompt clusters, checked against scipy."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats

from essaybench.human.ranking import ranking_with_ci, score_matrix


def frame(matrix: np.ndarray, models: list[str]) -> pl.DataFrame:
    return pl.DataFrame([{"question_id": f"q{i:02d}", "model": m, "score": float(v)}
                         for i, row in enumerate(matrix) for m, v in zip(models, row, strict=True)
                         if not np.isnan(v)])


def test_score_matrix_marks_missing_cells_and_rejects_duplicates() -> None:
    df = pl.DataFrame({"question_id": ["q1", "q1", "q2"], "model": ["b", "a", "a"],
                       "score": [1.0, 2.0, 3.0]})
    matrix, units, items = score_matrix(df, unit="question_id", item="model", score="score")
    assert units == ["q1", "q2"] and items == ["a", "b"]
    np.testing.assert_array_equal(matrix, [[2.0, 1.0], [3.0, np.nan]])
    with pytest.raises(ValueError, match=r"several scores, e\.g\. 'q1', 'a'"):
        score_matrix(pl.concat([df, df.head(2)]), unit="question_id", item="model",
                     score="score")


def test_ranking_means_cis_and_neighbours_are_scipys_t_intervals() -> None:
    """Issue 25 item 11: a model's interval is the one-sample t-interval of its per-prompt
    scores and a neighbour difference the paired t-interval (scipy), not bootstrap bounds."""
    rng = np.random.default_rng(2)
    base = rng.normal(0, 1, size=(30, 1))
    matrix = base + np.array([1.0, 0.0, 0.02, -1.0]) + rng.normal(0, 0.3, size=(30, 4))
    models = ["w", "x", "y", "z"]
    table = ranking_with_ci(frame(matrix, models), seed=9, n_boot=400)
    means = matrix.mean(axis=0)
    order = list(np.argsort(-means, kind="stable"))
    assert table["model"].to_list() == [models[k] for k in order]
    assert table["rank"].to_list() == [1, 2, 3, 4]
    np.testing.assert_allclose(table["mean"].to_numpy(), means[order])
    for pos, k in enumerate(order):
        ci = stats.ttest_1samp(matrix[:, k], 0.0).confidence_interval(0.95)
        row = table.row(pos, named=True)
        assert (row["lo"], row["hi"]) == pytest.approx((ci.low, ci.high), rel=1e-10)
        if pos == 3:
            continue
        j = order[pos + 1]
        d = stats.ttest_rel(matrix[:, k], matrix[:, j]).confidence_interval(0.95)
        assert (row["diff_lo"], row["diff_hi"]) == pytest.approx((d.low, d.high), rel=1e-10)
        assert row["tied_with_next"] == bool(d.low <= 0 <= d.high)
        assert row["next"] == models[j]
    # w is clearly best, x and y nearly equal, z clearly worst.
    assert table["tied_with_next"].to_list() == [False, True, False, None]
    # A missing cell is left out, never imputed: y's interval is over its 29 scores.
    matrix[4, 2] = np.nan
    missing = ranking_with_ci(frame(matrix, models), seed=9, n_boot=400)
    y = missing.filter(pl.col("model") == "y").row(0, named=True)
    ci = stats.ttest_1samp(matrix[~np.isnan(matrix[:, 2]), 2], 0.0).confidence_interval(0.95)
    assert y["n"] == 29 and (y["lo"], y["hi"]) == pytest.approx((ci.low, ci.high), rel=1e-10)
