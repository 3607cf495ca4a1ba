"""The length-controlled leaderboard (issue 28 item 3) against an independent fit: numpy's
least squares on another parametrisation (an intercept, treatment-coded models and genres,
uncentred length slopes per genre) and scipy's linregress for one model in one genre."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats

from essaybench.stats.length_control import length_controlled

GENRES = ("argumentative", "narrative")


def _essays(rng: np.random.Generator) -> pl.DataFrame:
    """Three models; "long" is the weakest but writes ~400 characters more, and the judge
    adds 3 points per 100 characters (narrative 1): raw, "long" looks best."""
    quality = {"good": 70.0, "mid": 67.0, "long": 64.0}
    extra = {"good": 0.0, "mid": 50.0, "long": 400.0}
    slope = {"argumentative": 0.03, "narrative": 0.01}
    rows = []
    for genre in GENRES:
        for _ in range(12):
            for model, q in quality.items():
                length = 700 + extra[model] + rng.normal(0, 80)
                rows.append({"model": model, "genre": genre, "length": round(length),
                             "score": q + slope[genre] * length + rng.normal(0, 1.5)})
    rows.append({"model": "mid", "genre": "narrative", "length": None, "score": 50.0})
    rows.append({"model": "mid", "genre": "narrative", "length": 800, "score": None})
    return pl.DataFrame(rows)


def test_slopes_and_controlled_means_match_an_independent_least_squares_fit() -> None:
    rows = _essays(np.random.default_rng(5))
    fit = length_controlled(rows)
    assert fit.left_out == 1  # a score without a length
    ok = rows.drop_nulls()
    y, x = ok["score"].to_numpy(), ok["length"].to_numpy().astype(float)
    m, g = ok["model"].to_numpy(), ok["genre"].to_numpy()
    design = np.column_stack([np.ones(len(y)), m == "long", m == "mid", g == "narrative",
                              x * (g == "argumentative"), x * (g == "narrative")])
    coef, *_ = np.linalg.lstsq(design.astype(float), y, rcond=None)
    beta = {"argumentative": coef[4], "narrative": coef[5]}
    slopes = dict(fit.slopes.select("genre", "slope_per_100").iter_rows())
    for genre in GENRES:
        assert slopes[genre] == pytest.approx(100 * beta[genre], rel=1e-9)
    mean_len = {k: x[g == k].mean() for k in GENRES}
    adjusted = y - np.array([beta[k] * (v - mean_len[k]) for k, v in zip(g, x, strict=True)])
    models = {r["model"]: r for r in fit.models.iter_rows(named=True)}
    for model in ("good", "mid", "long"):
        assert models[model]["controlled_mean"] == pytest.approx(adjusted[m == model].mean())
        assert models[model]["raw_mean"] == pytest.approx(y[m == model].mean())
    # raw, the long writer leads; controlled, the best model does
    assert models["long"]["raw_rank"] == 1 and models["good"]["controlled_rank"] == 1
    assert fit.models["model"].to_list() == ["good", "mid", "long"]
    assert slopes["argumentative"] == pytest.approx(3.0, abs=0.5)


def test_one_model_in_one_genre_is_a_simple_regression() -> None:
    rng = np.random.default_rng(8)
    x = rng.normal(800, 100, 30).round()
    y = 40 + 0.02 * x + rng.normal(0, 2, 30)
    fit = length_controlled(pl.DataFrame({"model": "m", "genre": "narrative", "length": x,
                                          "score": y}))
    assert fit.slopes["slope_per_100"][0] == pytest.approx(
        100 * stats.linregress(x, y).slope, rel=1e-9)
    assert fit.models["controlled_mean"][0] == pytest.approx(y.mean())  # one model: no shift


def test_a_genre_without_length_spread_has_no_slope() -> None:
    rows = pl.DataFrame({"model": ["a", "b", "a", "b"], "genre": "g",
                         "length": [500, 500, 500, 500], "score": [60.0, 70.0, 62.0, 68.0]})
    fit = length_controlled(rows)
    assert fit.slopes["slope_per_100"].to_list() == [0.0]
    assert fit.models.select("model", "controlled_mean").rows() == [("b", 69.0), ("a", 61.0)]
