"""Ranking by mean with paired bootstrap CIs, checked against a naive resampling loop."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from essaybench.human.ranking import ranking_with_ci, score_matrix


def frame(matrix: np.ndarray, models: list[str]) -> pl.DataFrame:
    return pl.DataFrame([{"question_id": f"q{i:02d}", "model": m, "score": float(v)}
                         for i, row in enumerate(matrix) for m, v in zip(models, row, strict=True)
                         if not np.isnan(v)])


def naive_replicates(matrix: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, matrix.shape[0], size=(n_boot, matrix.shape[0]))
    return np.array([np.nanmean(matrix[rows], axis=0) for rows in idx])


def test_score_matrix_marks_missing_cells_and_rejects_duplicates() -> None:
    df = pl.DataFrame({"question_id": ["q1", "q1", "q2"], "model": ["b", "a", "a"],
                       "score": [1.0, 2.0, 3.0]})
    matrix, units, items = score_matrix(df, unit="question_id", item="model", score="score")
    assert units == ["q1", "q2"] and items == ["a", "b"]
    np.testing.assert_array_equal(matrix, [[2.0, 1.0], [3.0, np.nan]])
    with pytest.raises(ValueError, match=r"several scores, e\.g\. 'q1', 'a'"):
        score_matrix(pl.concat([df, df.head(2)]), unit="question_id", item="model",
                     score="score")


def test_ranking_means_cis_and_neighbours_match_naive_bootstrap() -> None:
    rng = np.random.default_rng(2)
    base = rng.normal(0, 1, size=(30, 1))
    matrix = base + np.array([1.0, 0.0, 0.02, -1.0]) + rng.normal(0, 0.3, size=(30, 4))
    matrix[4, 2] = np.nan
    models = ["w", "x", "y", "z"]
    table = ranking_with_ci(frame(matrix, models), seed=9, n_boot=400)
    means = np.nanmean(matrix, axis=0)
    order = list(np.argsort(-means, kind="stable"))
    assert table["model"].to_list() == [models[k] for k in order]
    assert table["rank"].to_list() == [1, 2, 3, 4]
    np.testing.assert_allclose(table["mean"].to_numpy(), means[order])
    assert table.filter(pl.col("model") == "y")["n"].item() == 29

    boot = naive_replicates(matrix, 400, 9)
    lo, hi = np.quantile(boot, [0.025, 0.975], axis=0)
    np.testing.assert_allclose(table["lo"].to_numpy(), lo[order], rtol=1e-10)
    np.testing.assert_allclose(table["hi"].to_numpy(), hi[order], rtol=1e-10)
    for pos in range(3):
        i, j = order[pos], order[pos + 1]
        d_lo, d_hi = np.quantile(boot[:, i] - boot[:, j], [0.025, 0.975])
        row = table.row(pos, named=True)
        assert (row["diff_lo"], row["diff_hi"]) == pytest.approx((d_lo, d_hi), rel=1e-10)
        assert row["tied_with_next"] == bool(d_lo <= 0 <= d_hi)
        assert row["next"] == models[j]
    # w is clearly best, x and y nearly equal, z clearly worst.
    assert table["tied_with_next"].to_list() == [False, True, False, None]


def test_ranking_is_seeded() -> None:
    rng = np.random.default_rng(4)
    df = frame(rng.normal(size=(20, 3)), ["a", "b", "c"])
    first = ranking_with_ci(df, seed=1, n_boot=200)
    assert first.equals(ranking_with_ci(df, seed=1, n_boot=200))
    assert not first["lo"].equals(ranking_with_ci(df, seed=2, n_boot=200)["lo"])
