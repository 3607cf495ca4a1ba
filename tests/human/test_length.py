"""Length bias against scipy's linregress and a dummy-variable OLS fit."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import statsmodels.api as sm
from scipy import stats

from essaybench.human.length import length_bias, length_bias_table


def data(seed: int = 5) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(12), 8)
    length = rng.integers(100, 3000, groups.size).astype(float) + 500 * (groups % 3)
    score = np.clip(np.round(1 + 0.0004 * length + 0.1 * groups % 2 + rng.normal(0, 0.8,
                                                                            groups.size)), 0, 3)
    df = pl.DataFrame({"q": [f"q{g}" for g in groups], "chars": length, "score": score})
    return df.with_columns(pl.when(pl.int_range(pl.len()) % 10 == 0).then(None)
                           .otherwise(pl.col("chars")).alias("chars"))


def test_pooled_slope_and_spearman_match_scipy() -> None:
    df = data()
    result = length_bias(df, score="score", length="chars", per=1000.0)
    used = df.drop_nulls()
    fit = stats.linregress(used["chars"].to_numpy() / 1000, used["score"].to_numpy())
    assert result.n == used.height and result.n_excluded == df.height - used.height
    assert result.slope == pytest.approx(fit.slope, rel=1e-10)
    assert result.slope_se == pytest.approx(fit.stderr, rel=1e-8)
    assert result.slope_p == pytest.approx(fit.pvalue, rel=1e-6)
    t = stats.t.ppf(0.975, used.height - 2)
    assert (result.slope_lo, result.slope_hi) == pytest.approx(
        (fit.slope - t * fit.stderr, fit.slope + t * fit.stderr), rel=1e-8)
    ranks = np.corrcoef(stats.rankdata(used["chars"]), stats.rankdata(used["score"]))[0, 1]
    assert result.spearman == pytest.approx(ranks, abs=1e-12)
    assert np.isnan(result.within_slope) and result.n_groups == 0


def test_within_prompt_slope_matches_dummy_regression() -> None:
    df = data()
    result = length_bias(df, score="score", length="chars", group="q", per=1000.0)
    used = df.drop_nulls()
    dummies = (used["q"].to_numpy()[:, None] == np.unique(used["q"].to_numpy())).astype(float)
    design = np.column_stack([used["chars"].to_numpy() / 1000, dummies])
    fit = sm.OLS(used["score"].to_numpy(), design).fit()
    assert result.n_groups == 12
    assert result.within_slope == pytest.approx(fit.params[0], rel=1e-9)
    assert result.within_se == pytest.approx(fit.bse[0], rel=1e-9)
    assert result.within_p == pytest.approx(fit.pvalues[0], rel=1e-6)


def test_table_and_errors() -> None:
    df = data().with_columns((pl.col("chars") * 2).alias("bytes"))
    table = length_bias_table(df, score="score", lengths=["chars", "bytes"], group="q")
    assert table["length"].to_list() == ["chars", "bytes"]
    slopes = table["slope"].to_list()
    assert slopes[1] == pytest.approx(slopes[0] / 2)  # twice the units, half the slope
    with pytest.raises(ValueError, match="need at least 3"):
        length_bias(df.head(2), score="score", length="chars")
    with pytest.raises(ValueError, match="missing column"):
        length_bias(df, score="score", length="tokens")


def test_within_prompt_spearman_is_the_mean_of_per_prompt_scipy_rhos() -> None:
    """Issue 16: the within-prompt rank correlation beside the within-prompt slope."""
    df = data().with_columns(  # one prompt with a constant score: no ρ there
        pl.when(pl.col("q") == "q3").then(2.0).otherwise(pl.col("score")).alias("score"))
    result = length_bias(df, score="score", length="chars", group="q")
    rhos = []
    for _, part in df.drop_nulls().group_by("q"):
        if part["score"].n_unique() > 1 and part["chars"].n_unique() > 1 and part.height >= 3:
            rhos.append(stats.spearmanr(part["chars"], part["score"]).statistic)
    assert result.within_spearman_n == len(rhos) < 12  # q3 (at least) has no ρ
    assert result.within_spearman == pytest.approx(np.mean(rhos), abs=1e-12)
    t = np.mean(rhos) / (np.std(rhos, ddof=1) / np.sqrt(len(rhos)))
    assert result.within_spearman_p == pytest.approx(2 * stats.t.sf(abs(t), len(rhos) - 1))
    # A prompt-level confounder: long answers to some prompts, high scores to the same
    # ones, and no length effect inside any prompt. Pooled ρ is high, within-prompt ≈ 0.
    rng = np.random.default_rng(1)
    q = np.repeat(np.arange(40), 10)
    confounded = pl.DataFrame({"q": q, "len": 1000.0 * q + rng.normal(0, 50, q.size),
                               "score": q / 10 + rng.normal(0, 0.5, q.size)})
    both = length_bias(confounded, score="score", length="len", group="q")
    assert both.spearman > 0.8 and abs(both.within_spearman) < 0.1
    assert np.isnan(length_bias(df, score="score", length="chars").within_spearman)
