"""Davidson–Bradley–Terry: fits checked against scipy, statsmodels and closed forms."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
import statsmodels.api as sm
from scipy.optimize import minimize
from scipy.stats import t as t_dist

from essaybench.stats.bradley_terry import (
    bradley_terry,
    fit_davidson,
    ranking_table,
    sum_zero_basis,
)


def _outcomes(theta: np.ndarray, nu: float, n_prompts: int, seed: int,
              pairs: list[tuple[int, int]] | None = None) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    k = len(theta)
    pairs = pairs or [(i, j) for i in range(k) for j in range(i + 1, k)]
    rows = []
    for p in range(n_prompts):
        for i, j in pairs:
            a, b = math.exp(theta[i]), math.exp(theta[j])
            t = nu * math.sqrt(a * b)
            u = rng.random() * (a + b + t)
            verdict = "A" if u < a else ("B" if u < a + b else "tie")
            # Alternate which model is listed first: orientation must not matter.
            first, second = (i, j) if p % 2 else (j, i)
            if first != i:
                verdict = {"A": "B", "B": "A", "tie": "tie"}[verdict]
            rows.append((f"p{p:03d}", f"m{first}", f"m{second}", verdict, "ok"))
    return pl.DataFrame(rows, schema=["prompt_id", "model_a", "model_b", "verdict", "status"],
                        orient="row")


def _neg_loglik(x: np.ndarray, df: pl.DataFrame, k: int) -> float:
    """Davidson log-likelihood written out per comparison, θ_k = −Σ others."""
    theta = np.append(x[: k - 1], -x[: k - 1].sum())
    log_nu = x[k - 1]
    ti = theta[[int(a[1:]) for a in df["model_a"]]]
    tj = theta[[int(b[1:]) for b in df["model_b"]]]
    verdict = df["verdict"].to_numpy()
    log_tie = log_nu + (ti + tj) / 2
    log_d = np.logaddexp(np.logaddexp(ti, tj), log_tie)
    own = np.where(verdict == "A", ti, np.where(verdict == "B", tj, log_tie))
    return -float((own - log_d).sum())


def test_fit_equals_scipy_maximum_of_handwritten_likelihood() -> None:
    theta = np.array([0.4, -0.2, 0.1, -0.3])
    df = _outcomes(theta, 0.7, 60, seed=1)
    fit = fit_davidson(df, ridge=0.0)
    opt = minimize(_neg_loglik, np.zeros(4), args=(df, 4), method="BFGS",
                   options={"gtol": 1e-9})
    ref = np.append(opt.x[:3], -opt.x[:3].sum())
    np.testing.assert_allclose(fit.theta, ref, atol=1e-5)
    assert fit.nu == pytest.approx(math.exp(opt.x[3]), rel=1e-5)
    assert fit.theta.sum() == pytest.approx(0.0, abs=1e-12) and fit.converged


def test_no_ties_equals_statsmodels_logistic_regression() -> None:
    theta = np.array([0.5, 0.0, -0.5])
    df = _outcomes(theta, 0.0, 80, seed=2)
    assert "tie" not in df["verdict"].to_list()
    fit = fit_davidson(df, ridge=0.0)
    assert fit.nu == 0.0
    design = np.zeros((df.height, 3))
    y = np.zeros(df.height)
    for r, (a, b, verdict) in enumerate(df.select("model_a", "model_b", "verdict").iter_rows()):
        design[r, int(a[1:])] += 1
        design[r, int(b[1:])] -= 1
        y[r] = verdict == "A"
    # Model m2 is the reference (its column dropped): coefficients are θ_i − θ_2.
    logit = sm.Logit(y, design[:, :2]).fit(disp=0, tol=1e-12)
    np.testing.assert_allclose(fit.theta[:2] - fit.theta[2], logit.params, atol=1e-6)


def test_two_models_closed_form() -> None:
    # Saturated: θ1 − θ2 = log(w1/w2) and ν = t / sqrt(w1·w2).
    rows = [("p", "x", "y", "A")] * 30 + [("p", "x", "y", "B")] * 12 + \
        [("p", "y", "x", "tie")] * 9 + [("q", "y", "x", "A")] * 8
    df = pl.DataFrame(rows, schema=["prompt_id", "model_a", "model_b", "verdict"],
                      orient="row")
    w_x, w_y, t = 30, 12 + 8, 9
    fit = fit_davidson(df, ridge=0.0)
    assert fit.theta[0] - fit.theta[1] == pytest.approx(math.log(w_x / w_y), rel=1e-8)
    assert fit.nu == pytest.approx(t / math.sqrt(w_x * w_y), rel=1e-8)
    res = bradley_terry(df, n_boot=20, seed=0, ridge=0.0)
    gap = 400 * math.log10(w_x / w_y)
    # Two models: the median model (the ⌈k/2⌉-th best) is the stronger, x, at 1000.
    assert res.reference == "x" and res.rating[0] == 1000.0
    assert res.rating[1] == pytest.approx(1000 - gap, rel=1e-8)


def test_ranking_table_record_anchor_and_failed_rows() -> None:
    theta = np.array([0.6, 0.0, -0.6])
    df = _outcomes(theta, 0.5, 50, seed=3)
    df = pl.concat([df, pl.DataFrame(
        [("p000", "m0", "m1", None, "api_error"), ("p001", "m1", "m2", "A", "parse_error")],
        schema=df.schema, orient="row")])
    res = bradley_terry(df, n_boot=200, seed=1)
    assert res.n_failed == 2
    assert res.reference == "m1" and res.rating[1] == 1000.0  # the median of three
    table = res.table()
    assert table["model"].to_list() == ["m0", "m1", "m2"]
    assert table["rank"].to_list() == [1, 2, 3]
    ok = df.filter(pl.col("status") == "ok")
    m0 = ok.filter((pl.col("model_a") == "m0") | (pl.col("model_b") == "m0"))
    wins = m0.filter(((pl.col("model_a") == "m0") & (pl.col("verdict") == "A"))
                     | ((pl.col("model_b") == "m0") & (pl.col("verdict") == "B"))).height
    ties = m0.filter(pl.col("verdict") == "tie").height
    row = table.row(0, named=True)
    assert (row["wins"], row["ties"], row["n"]) == (wins, ties, m0.height)
    assert row["losses"] == m0.height - wins - ties
    assert (table["ci_lo"] <= table["rating"]).all() and (table["rating"] <= table["ci_hi"]).all()
    anchored = bradley_terry(df, n_boot=200, seed=1, anchor="m1")
    assert anchored.rating[1] == 1000.0 and anchored.lo[1] == anchored.hi[1] == 1000.0
    np.testing.assert_allclose(anchored.rating - anchored.rating[1], res.rating - res.rating[1])


def test_intervals_equal_statsmodels_clustered_logistic_regression() -> None:
    """Issue 25 items 9 and 11: without ties and at ridge 0 the interval of θ_i − θ_ref is
    statsmodels' Logit with prompt-clustered covariance (G/(G−1), t with G − 1 df)."""
    theta = np.array([0.5, 0.1, -0.1, -0.5])
    df = _outcomes(theta, 0.0, 25, seed=12)
    res = bradley_terry(df, ridge=0.0, anchor="m2")
    design = np.zeros((df.height, 4))
    y = np.zeros(df.height)
    for r, (a, b, verdict) in enumerate(df.select("model_a", "model_b", "verdict").iter_rows()):
        design[r, int(a[1:])] += 1
        design[r, int(b[1:])] -= 1
        y[r] = verdict == "A"
    groups = np.unique(df["prompt_id"].to_numpy(), return_inverse=True)[1]
    keep = [0, 1, 3]  # m2 is the reference
    logit = sm.Logit(y, design[:, keep]).fit(
        disp=0, tol=1e-12, cov_type="cluster",
        cov_kwds={"groups": groups, "use_correction": False})
    n_g = len(set(groups.tolist()))
    se = np.sqrt(np.diag(logit.cov_params()) * n_g / (n_g - 1))
    q = t_dist.ppf(0.975, n_g - 1)
    scale = 400 / math.log(10)
    np.testing.assert_allclose(res.rating[keep], 1000 + scale * logit.params, rtol=1e-7)
    np.testing.assert_allclose(res.lo[keep], 1000 + scale * (logit.params - q * se), rtol=1e-7)
    np.testing.assert_allclose(res.hi[keep], 1000 + scale * (logit.params + q * se), rtol=1e-7)
    assert res.lo[2] == res.hi[2] == 1000.0


def _champion_study() -> pl.DataFrame:
    """Five models playing each other on 30 prompts, and a champion that plays each of them
    once per prompt: 150 comparisons, 149 won."""
    rest = _outcomes(np.array([0.4, 0.2, 0.0, -0.2, -0.4]), 0.0, 30, seed=21)
    top = pl.DataFrame([(f"p{p:03d}", "champ", f"m{i}", "B" if (p, i) == (7, 2) else "A",
                         "ok") for p in range(30) for i in range(5)],
                       schema=rest.schema, orient="row")
    return pl.concat([rest, top])


def _neg_log_posterior(x: np.ndarray, winners: np.ndarray, losers: np.ndarray) -> float:
    """Plain Bradley–Terry written out per comparison, θ_last = −Σ others, plus the
    stated prior: independent N(0, 3²) on the mean-zero strengths."""
    theta = np.append(x, -x.sum())
    diff = theta[winners] - theta[losers]
    return float(np.logaddexp(0.0, -diff).sum() + (theta**2).sum() / (2 * 3.0**2))


def test_a_model_winning_149_of_150_has_a_finite_prior_fit_and_others_keep_their_width(
        ) -> None:
    """Issue 25 item 9: the stated prior keeps the near-separated model finite (checked
    against scipy on the penalised likelihood written here), and the median-model reference
    keeps the other models' intervals as wide as without the champion."""
    df = _champion_study()
    res = bradley_terry(df)
    names = list(res.models)
    winners = np.array([names.index(a if v == "A" else b) for a, b, v in
                        df.select("model_a", "model_b", "verdict").iter_rows()])
    losers = np.array([names.index(b if v == "A" else a) for a, b, v in
                       df.select("model_a", "model_b", "verdict").iter_rows()])
    k = len(names)
    opt = minimize(_neg_log_posterior, np.zeros(k - 1), args=(winners, losers),
                   method="BFGS", options={"gtol": 1e-10})
    theta = np.append(opt.x, -opt.x.sum())
    np.testing.assert_allclose(res.theta, theta, atol=1e-5)
    champ = names.index("champ")
    table = res.table()
    assert table.row(0, named=True)["model"] == "champ" and table["estimable"].all()
    assert np.isfinite(res.lo).all() and np.isfinite(res.hi).all()
    assert res.hi[champ] - res.lo[champ] < 1000  # finite and set by the prior and one loss
    # Reference: the median model of the point fit (the 3rd best of 6), not the mean.
    order = sorted(range(k), key=lambda i: (-theta[i], names[i]))
    assert res.reference == names[order[2]] and res.rating[order[2]] == 1000.0
    without = bradley_terry(df.filter(pl.col("model_a") != "champ"), anchor=res.reference)
    width = {m: res.hi[i] - res.lo[i] for i, m in enumerate(names)}
    for i, m in enumerate(without.models):
        if m != res.reference:
            assert width[m] == pytest.approx(without.hi[i] - without.lo[i], rel=0.1)
            assert width[m] < 250


def test_separation_needs_ridge_and_disconnected_graph_is_rejected() -> None:
    rows = [("p1", "a", "b", "A"), ("p2", "a", "b", "A"), ("p1", "b", "c", "tie"),
            ("p2", "c", "b", "A")]
    df = pl.DataFrame(rows, schema=["prompt_id", "model_a", "model_b", "verdict"],
                      orient="row")
    with pytest.raises(ValueError, match="ridge"):
        fit_davidson(df, ridge=0.0)
    fit = fit_davidson(df)  # the stated prior: finite under separation
    assert np.isfinite(fit.theta).all() and fit.theta[0] == fit.theta.max()
    apart = pl.DataFrame([("p", "a", "b", "A"), ("p", "c", "d", "B"), ("q", "a", "b", "B"),
                          ("q", "c", "d", "A")],
                         schema=["prompt_id", "model_a", "model_b", "verdict"], orient="row")
    with pytest.raises(ValueError, match="disconnected"):
        fit_davidson(apart, ridge=0.0)


def test_several_judges_split_by_ranking_table() -> None:
    one = _outcomes(np.array([0.5, 0.0, -0.5]), 0.5, 20, seed=5)
    two = _outcomes(np.array([-0.5, 0.0, 0.5]), 0.5, 20, seed=6)
    both = pl.concat([one.with_columns(pl.lit("j1").alias("judge")),
                      two.with_columns(pl.lit("j2").alias("judge"))])
    with pytest.raises(ValueError, match="several judges"):
        bradley_terry(both)
    table = ranking_table(both, n_boot=50, seed=0)
    assert table.columns[0] == "judge" and table.height == 6
    assert table.filter(pl.col("judge") == "j1")["model"][0] == "m0"
    assert table.filter(pl.col("judge") == "j2")["model"][0] == "m2"


def test_sum_zero_basis_is_orthonormal() -> None:
    basis = sum_zero_basis(5)
    np.testing.assert_allclose(basis.T @ basis, np.eye(4), atol=1e-12)
    np.testing.assert_allclose(basis.sum(axis=0), 0.0, atol=1e-12)


def test_a_model_winning_every_comparison_is_flagged_unbounded() -> None:
    """Issue 16: one model beats everyone on every prompt. Its rating is +∞ at the maximum
    likelihood, so it gets no rating and no interval, not the ridge's narrow finite one."""
    theta = np.array([0.3, 0.0, -0.3])
    rest = _outcomes(theta, 0.6, 40, seed=8)  # m0–m2 among themselves: connected
    top = pl.DataFrame([(f"p{p:03d}", "champ", f"m{i}", "A", "ok") for p in range(40)
                        for i in range(3)], schema=rest.schema, orient="row")
    res = bradley_terry(pl.concat([rest, top]), n_boot=200, seed=3)
    table = res.table()
    champ = table.row(0, named=True)
    assert champ["model"] == "champ" and champ["rank"] == 1
    assert champ["estimable"] is False
    assert champ["rating"] is None and champ["ci_lo"] is None and champ["ci_hi"] is None
    assert "unbounded above" in champ["note"] and (champ["wins"], champ["losses"]) == (120, 0)
    # The others are rated among themselves exactly as without the champion (the same
    # reference: their median model).
    alone = bradley_terry(rest, n_boot=200, seed=3)
    assert res.reference == alone.reference
    rated = table.filter(pl.col("estimable")).sort("model")
    assert rated["model"].to_list() == ["m0", "m1", "m2"] and rated["note"].is_null().all()
    np.testing.assert_allclose(rated["rating"].to_numpy(), alone.rating, rtol=1e-9)
    np.testing.assert_allclose(rated["ci_lo"].to_numpy(), alone.lo, rtol=1e-9)
    np.testing.assert_allclose(rated["ci_hi"].to_numpy(), alone.hi, rtol=1e-9)
    # Before issue 16 the ridge gave the champion a finite rating with a narrow interval.
    assert res.order is not None and res.order[res.models.index("champ")] > 1500


def test_a_model_losing_everything_and_a_group_never_losing_to_the_rest() -> None:
    rows = [("p1", "a", "b", "A"), ("p2", "b", "a", "A"), ("p1", "b", "c", "tie"),
            ("p2", "c", "a", "B"), ("p3", "a", "c", "tie"),  # a, b, c: connected
            ("p1", "d", "e", "A"), ("p2", "e", "d", "A"),  # d, e: connected, ...
            ("p1", "d", "a", "A"), ("p2", "b", "e", "B"), ("p3", "e", "c", "A"),  # ... above
            ("p1", "z", "a", "B"), ("p2", "c", "z", "A"), ("p3", "z", "d", "B")]  # z: below
    df = pl.DataFrame(rows, schema=["prompt_id", "model_a", "model_b", "verdict"],
                      orient="row")
    table = bradley_terry(df, n_boot=50, seed=0).table()
    by = {r["model"]: r for r in table.iter_rows(named=True)}
    assert {m for m, r in by.items() if r["estimable"]} == {"a", "b", "c"}
    assert "unbounded above" in by["d"]["note"] and "unbounded above" in by["e"]["note"]
    assert "unbounded below" in by["z"]["note"] and by["z"]["rank"] == 6
    assert {by["d"]["rank"], by["e"]["rank"]} == {1, 2}
    # The anchor picks the rated group.
    anchored = bradley_terry(df, n_boot=50, seed=0, anchor="d").table()
    assert set(anchored.filter(pl.col("estimable"))["model"].to_list()) == {"d", "e"}
    assert anchored.filter(pl.col("model") == "d")["rating"][0] == 1000.0


def test_connected_design_keeps_finite_intervals() -> None:
    df = _outcomes(np.array([1.5, 0.0, -1.5]), 0.2, 30, seed=9)
    res = bradley_terry(df, n_boot=200, seed=2)
    table = res.table()
    assert table["estimable"].all() and table["note"].is_null().all()
    assert np.isfinite(res.lo).all() and np.isfinite(res.hi).all()
    rated = table.filter(pl.col("model") != res.reference)  # the reference: [1000, 1000]
    assert (rated["ci_lo"] < rated["rating"]).all() and (rated["rating"] < rated["ci_hi"]).all()
