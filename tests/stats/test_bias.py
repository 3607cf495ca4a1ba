"""Bias monitors against independent computations (numpy, statsmodels, by-hand means)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
import statsmodels.api as sm
from scipy import stats
from scipy.stats import t as t_dist

from essaybench.constraints.counting import count_chinese_chars as chinese_length
from essaybench.stats.bias import infer_family, length_bias, self_preference


def test_chinese_length_counts_ideographs_only() -> None:
    assert chinese_length("你好，world 123！") == 2
    assert chinese_length("春眠不觉晓\n处处闻啼鸟") == 10
    assert chinese_length("") == 0


@pytest.mark.parametrize(("model_id", "family"), [
    ("gpt-4o-2024-08-06", "openai"), ("openai/gpt-4o", "openai"), ("o1-mini", "openai"),
    ("o3", "openai"), ("gpt-oss-20b", "openai"), ("deepseek-r1", "deepseek"),
    ("deepseek-r1-distill-qwen-7b", "deepseek"), ("Qwen/Qwen2.5-72B-Instruct", "qwen"),
    ("qwq-32b", "qwen"), ("ollama/qwen2.5", "qwen"), ("doubao-1.5-pro-32k", "doubao"),
    ("glm-4-plus", "glm"), ("chatglm3-6b", "glm"), ("grok-2", "grok"),
    ("claude-3-5-sonnet-20241022", "claude"), ("gemini-1.5-pro", "gemini"),
    ("meta-llama/Llama-3.1-8B-Instruct", "llama"), ("mistral-large-latest", "mistral"),
    ("HuggingFaceTB/SmolLM2-135M-Instruct", "smollm"), ("smollm2-135m-q4_1", "smollm"),
    ("ollama/gemma2", None), ("yi-large", None), ("fake-writer", None), ("pro1", None),
])
def test_infer_family(model_id: str, family: str | None) -> None:
    assert infer_family(model_id) == family


def _length_rows(seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for judge, slope in (("j1", 0.01), ("j2", -0.004)):
        for genre in ("argumentative", "narrative"):
            for _ in range(40):
                length = float(rng.integers(300, 1500))
                status = "ok" if rng.random() > 0.1 else "parse_error"
                score = 60 + slope * length + rng.normal(0, 4)
                rows.append((judge, genre, status, score if status == "ok" else None, length))
    rows.append(("j3", "narrative", "ok", 70.0, 800.0))  # n = 1: undefined, not zero
    return pl.DataFrame(rows, schema=["judge", "genre", "status", "score_weighted",
                                      "length_chars"], orient="row")


def test_length_bias_against_numpy_and_statsmodels() -> None:
    rows = _length_rows()
    out = length_bias(rows)
    assert out.height == 3 + 3 + 2
    ok = rows.filter(pl.col("status") == "ok")
    for judge, genre in (("j1", "all"), ("j1", "narrative"), ("j2", "argumentative")):
        part = ok.filter(pl.col("judge") == judge)
        if genre != "all":
            part = part.filter(pl.col("genre") == genre)
        x, y = part["length_chars"].to_numpy(), part["score_weighted"].to_numpy()
        row = out.filter((pl.col("judge") == judge) & (pl.col("genre") == genre)).row(
            0, named=True)
        slope, intercept = np.polyfit(x, y, 1)
        ols = sm.OLS(y, sm.add_constant(x)).fit()
        r = np.corrcoef(x, y)[0, 1]
        p_r = 2 * t_dist.sf(abs(r) * math.sqrt((len(x) - 2) / (1 - r * r)), len(x) - 2)
        rank_x = pl.Series(x).rank("average").to_numpy()
        rank_y = pl.Series(y).rank("average").to_numpy()
        assert row["n"] == len(x)
        assert row["slope_per_100"] == pytest.approx(100 * slope, rel=1e-9)
        assert row["intercept"] == pytest.approx(intercept, rel=1e-9)
        assert row["slope_se"] == pytest.approx(100 * ols.bse[1], rel=1e-9)
        assert row["slope_p"] == pytest.approx(ols.pvalues[1], rel=1e-6)
        assert row["pearson_r"] == pytest.approx(r, rel=1e-9)
        assert row["pearson_p"] == pytest.approx(p_r, rel=1e-6)
        assert row["spearman_rho"] == pytest.approx(np.corrcoef(rank_x, rank_y)[0, 1],
                                                    rel=1e-9)
    j1 = out.filter((pl.col("judge") == "j1") & (pl.col("genre") == "all")).row(0, named=True)
    assert j1["slope_per_100"] > 0 and j1["pearson_p"] < 0.05
    lone = out.filter(pl.col("judge") == "j3").row(0, named=True)
    assert lone["n"] == 1 and lone["slope_per_100"] is None and lone["spearman_rho"] is None
    with pytest.raises(ValueError, match="length_chars"):
        length_bias(rows.drop("length_chars"))


MODELS = ("deepseek-chat", "gpt-4o-mini", "qwen-max", "mystery-model")


def _judgments(seed: int = 0, n_prompts: int = 50) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(n_prompts):
        difficulty = rng.normal(0, 5)
        for judge in ("deepseek-r1", "gpt-4o"):
            for model, quality in zip(MODELS, (72, 70, 68, 65), strict=True):
                bonus = 6.0 if judge == "deepseek-r1" and model == "deepseek-chat" else 0.0
                status = "ok" if rng.random() > 0.05 else "api_error"
                score = quality + difficulty + bonus + rng.normal(0, 3)
                rows.append((f"p{p:02d}", model, judge, status,
                             score if status == "ok" else None))
    return pl.DataFrame(rows, schema=["prompt_id", "model", "judge", "status",
                                      "score_weighted"], orient="row")


def _split_means(ok: pl.DataFrame, judge: str, family_models: set[str]) -> tuple[float, float]:
    mine = ok.filter(pl.col("judge") == judge)
    own = mine.filter(pl.col("model").is_in(list(family_models)))["score_weighted"].mean()
    other = mine.filter(~pl.col("model").is_in([*family_models, "mystery-model"]))[
        "score_weighted"].mean()
    return float(own), float(other)  # type: ignore[arg-type]


def test_self_preference_means_diff_and_excess_by_hand() -> None:
    df = _judgments()
    out = self_preference(df, n_boot=500, seed=3)
    assert out["judge"].to_list() == ["deepseek-r1", "gpt-4o"]
    assert out["family"].to_list() == ["deepseek", "openai"]
    ok = df.filter(pl.col("status") == "ok")
    own_d, other_d = _split_means(ok, "deepseek-r1", {"deepseek-chat"})
    own_g, other_g = _split_means(ok, "gpt-4o", {"deepseek-chat"})
    row = out.row(0, named=True)
    assert (row["own_mean"], row["other_mean"]) == pytest.approx((own_d, other_d))
    assert row["diff"] == pytest.approx(own_d - other_d)
    assert row["excess"] == pytest.approx((own_d - other_d) - (own_g - other_g))
    assert row["excess_lo"] > 0 and row["excess_lo"] < 6.0 < row["excess_hi"]
    assert row["n_own"] == ok.filter((pl.col("judge") == "deepseek-r1")
                                     & (pl.col("model") == "deepseek-chat")).height
    # gpt-4o's own family is gpt-4o-mini; its excess is against deepseek-r1's view of
    # the same split (which the bonus to deepseek-chat, an "other" model, lowers).
    own_g2, other_g2 = _split_means(ok, "gpt-4o", {"gpt-4o-mini"})
    own_d2, other_d2 = _split_means(ok, "deepseek-r1", {"gpt-4o-mini"})
    gpt = out.row(1, named=True)
    assert gpt["diff"] == pytest.approx(own_g2 - other_g2)
    assert gpt["excess"] == pytest.approx((own_g2 - other_g2) - (own_d2 - other_d2))


def test_self_preference_cis_are_statsmodels_cluster_robust_t() -> None:
    """Issue 25 item 11: diff and excess intervals are t-intervals with the prompt-clustered
    sandwich variance (statsmodels OLS on group dummies, clustered by prompt, G/(G−1)
    factor and t with G − 1 df), not percentile-bootstrap bounds."""
    df = _judgments(seed=1, n_prompts=25)
    out = self_preference(df)
    ok = df.filter((pl.col("status") == "ok") & (pl.col("model") != "mystery-model"))
    y = ok["score_weighted"].to_numpy()
    own = (ok["model"] == "deepseek-chat").to_numpy().astype(float)
    j1 = (ok["judge"] == "deepseek-r1").to_numpy().astype(float)
    groups = np.unique(ok["prompt_id"].to_numpy(), return_inverse=True)[1]
    # Saturated: the four (judge × own/other) means; contrasts give diff and excess.
    x = np.column_stack([j1 * (1 - own), j1 * own, (1 - j1) * (1 - own), (1 - j1) * own])
    fit = sm.OLS(y, x).fit(cov_type="cluster",
                           cov_kwds={"groups": groups, "use_correction": False})
    n_g = len(set(groups.tolist()))
    q = stats.t.ppf(0.975, n_g - 1)
    row = out.row(0, named=True)
    for name, contrast in (("diff", [-1.0, 1.0, 0.0, 0.0]),
                           ("excess", [-1.0, 1.0, 1.0, -1.0])):
        c = np.array(contrast)
        est = float(c @ fit.params)
        se = float(np.sqrt(c @ fit.cov_params() @ c * n_g / (n_g - 1)))
        assert row[name] == pytest.approx(est, rel=1e-10)
        assert (row[f"{name}_lo"], row[f"{name}_hi"]) == pytest.approx(
            (est - q * se, est + q * se), rel=1e-10)


def test_family_mapping_overrides_and_unknown_judges_are_skipped() -> None:
    df = _judgments(n_prompts=10).with_columns(
        pl.col("judge").replace({"gpt-4o": "house-judge"}))
    out = self_preference(df, n_boot=50, seed=0)
    assert out["judge"].to_list() == ["deepseek-r1"]  # house-judge: unknown family
    assert out["excess"][0] is not None
    mapped = self_preference(df, {"house-judge": "qwen"}, n_boot=50, seed=0)
    assert mapped["judge"].to_list() == ["deepseek-r1", "house-judge"]
    assert mapped.row(1, named=True)["family"] == "qwen"
