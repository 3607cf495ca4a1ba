"""Win rates: hand-counted rates, a naive prompt-resampling loop, failed rows, orientation."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from essaybench.stats.winrate import win_rates

COLS = ["judge", "prompt_id", "model_a", "model_b", "verdict", "status"]


def _table(seed: int = 0, n_prompts: int = 40) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows: list[tuple[str, str, str, str, str | None, str]] = []
    for p in range(n_prompts):
        for cand, p_win in (("cand1", 0.7), ("cand2", 0.45)):
            u = rng.random()
            verdict = "A" if u < p_win else ("tie" if u < p_win + 0.15 else "B")
            if p % 3 == 0:  # baseline listed first on some prompts
                rows.append(("j", f"p{p:02d}", "base", cand,
                             {"A": "B", "B": "A", "tie": "tie"}[verdict], "ok"))
            else:
                rows.append(("j", f"p{p:02d}", cand, "base", verdict, "ok"))
    rows += [("j", "p00", "cand1", "base", None, "api_error"),
             ("j", "p01", "cand2", "base", "A", "parse_error"),
             ("j", "p02", "cand3", "base", None, "refused")]
    return pl.DataFrame(rows, schema=COLS, orient="row")


def _hand_rate(df: pl.DataFrame, cand: str) -> tuple[float, int, int, int]:
    ok = df.filter(pl.col("status") == "ok")
    wins = ties = losses = 0
    for a, b, verdict in ok.select("model_a", "model_b", "verdict").iter_rows():
        if cand not in (a, b):
            continue
        if verdict == "tie":
            ties += 1
        elif (verdict == "A") == (a == cand):
            wins += 1
        else:
            losses += 1
    return (wins + 0.5 * ties) / (wins + ties + losses), wins, losses, ties


def test_rates_counts_and_failed_rows_against_baseline() -> None:
    df = _table()
    out = win_rates(df, baseline="base", n_boot=300, seed=1)
    assert out["model_b"].to_list() == ["base"] * 3
    by = {r["model_a"]: r for r in out.iter_rows(named=True)}
    for cand in ("cand1", "cand2"):
        rate, wins, losses, ties = _hand_rate(df, cand)
        row = by[cand]
        assert row["win_rate"] == pytest.approx(rate)
        assert (row["wins"], row["losses"], row["ties"]) == (wins, losses, ties)
        assert row["n"] == wins + losses + ties and row["failed"] == 1
        assert row["ci_lo"] <= rate <= row["ci_hi"]
    assert by["cand3"]["n"] == 0 and by["cand3"]["win_rate"] is None
    assert by["cand3"]["failed"] == 1
    assert by["cand1"]["indistinguishable"] is False  # 0.7 over 40 prompts
    assert by["cand2"]["indistinguishable"] is True


def test_cis_are_the_t_interval_over_prompts() -> None:
    """Issue 25 item 11: one comparison per prompt, so the cluster-t interval is the
    one-sample t-interval of the per-prompt results (scipy), not a percentile bootstrap."""
    df = _table(seed=2, n_prompts=30)
    out = win_rates(df, baseline="base")
    ok = df.filter(pl.col("status") == "ok")
    for cand in ("cand1", "cand2"):
        per_prompt = [0.5 if verdict == "tie" else float((verdict == "A") == (a == cand))
                      for a, b, verdict in ok.select("model_a", "model_b", "verdict")
                      .iter_rows() if cand in (a, b)]
        ci = stats.ttest_1samp(per_prompt, 0.5).confidence_interval(0.95)
        row = out.filter(pl.col("model_a") == cand).row(0, named=True)
        assert (row["ci_lo"], row["ci_hi"]) == pytest.approx((ci.low, ci.high), rel=1e-10)
        assert row["ci_note"] is None
        assert row["indistinguishable"] is bool(ci.low <= 0.5 <= ci.high)


def test_a_pair_won_on_every_prompt_gets_exact_bounds_and_few_prompts_none() -> None:
    rows = [("j", f"p{p:02d}", "a", "b", "A", "ok") for p in range(20)]
    rows += [("j", f"p{p:02d}", "c", "b", "tie" if p else "A", "ok") for p in range(3)]
    out = win_rates(pl.DataFrame(rows, schema=COLS, orient="row"), baseline="b")
    a = out.filter(pl.col("model_a") == "a").row(0, named=True)
    lo, hi = proportion_confint(20, 20, alpha=0.05, method="beta")
    assert a["win_rate"] == 1.0 and (a["ci_lo"], a["ci_hi"]) == pytest.approx((lo, hi))
    assert a["indistinguishable"] is False and "every prompt" in a["ci_note"]
    c = out.filter(pl.col("model_a") == "c").row(0, named=True)
    assert c["ci_lo"] is None and c["indistinguishable"] is True
    assert "n too small" in c["ci_note"]


def test_all_pairs_orientation_and_judges() -> None:
    df = _table(seed=3)
    both = pl.concat([df, df.with_columns(pl.lit("k").alias("judge"))])
    out = win_rates(both, n_boot=50, seed=0)
    assert out["judge"].unique().sort().to_list() == ["j", "k"]
    j = out.filter(pl.col("judge") == "j")
    # Without a baseline, pairs are alphabetical: base < cand1.
    row = j.filter(pl.col("model_b") == "cand1").row(0, named=True)
    rate, wins, losses, _ = _hand_rate(df, "cand1")
    assert row["model_a"] == "base"
    assert row["win_rate"] == pytest.approx(1 - rate)
    assert (row["wins"], row["losses"]) == (losses, wins)


def test_invalid_verdict_is_an_error() -> None:
    df = pl.DataFrame([("j", "p", "a", "b", "maybe", "ok")], schema=COLS, orient="row")
    with pytest.raises(ValueError, match="verdict"):
        win_rates(df)
    with pytest.raises(ValueError, match="lack"):
        win_rates(df.drop("verdict"))
