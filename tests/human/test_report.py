"""The WritingPreferenceBench report: synthetic data end to end, then the real data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from essaybench.human import build_wpb_report
from essaybench.human.report import WpbReport, tier_items
from essaybench.human.sensitivity import tier_sensitivity
from essaybench.human.wpb import load_wpb
from tests.human.conftest import MakeWpb


def test_synthetic_report(make_wpb: MakeWpb) -> None:
    folder = make_wpb(n_prompts=16, n_models=4, alt_models=2, seed=3)
    report = build_wpb_report(folder, seed=7, n_boot=300)
    rows = load_wpb(folder).responses
    doubled = rows.filter(pl.col("score_alt").is_not_null())
    a, b = doubled["score"].to_numpy(), doubled["score_alt"].to_numpy()

    overall = report.agreement.filter(pl.col("group") == "overall").row(0, named=True)
    assert overall["n"] == 32
    assert overall["exact"] == pytest.approx(np.mean(a == b))
    assert overall["within_one"] == pytest.approx(np.mean(np.abs(a - b) <= 1))
    assert report.agreement["group"].to_list() == ["Model-0", "Model-1", "overall"]

    assert report.ranking["model"].to_list() == (
        rows.group_by("model").agg(pl.col("score").mean()).sort("score", descending=True)
        ["model"].to_list())
    assert report.ranking["n"].to_list() == [16] * 4
    assert report.length_bias["length"].to_list() == ["cjk_chars", "word_len"]
    assert report.sensitivity.height == 6
    assert set(report.tables()) == {"wpb_agreement", "wpb_ranking", "wpb_length_bias",
                                    "wpb_sensitivity"}
    assert report.score_counts == dict(rows["score"].value_counts().iter_rows())

    md = report.to_markdown()
    sections = [line for line in md.splitlines() if line.startswith("## ")]
    assert sections[0] == "## Headline"
    assert len(sections) == 6
    assert f"exact {100 * np.mean(a == b):.1f}%" in md
    # Issue 16: unweighted Cohen κ, the within-prompt Spearman, and what length counts.
    kappa = cohen_kappa_score(a, b)
    assert overall["kappa"] == pytest.approx(kappa, abs=1e-12)
    assert f"Cohen κ {kappa:.3f} (unweighted)" in md
    chars = report.length_bias.row(0, named=True)
    per_prompt = [stats.spearmanr(g["cjk_chars"], g["score"]).statistic
                  for _, g in rows.group_by("question_id")
                  if g["score"].n_unique() > 1 and g["cjk_chars"].n_unique() > 1]
    assert chars["within_spearman"] == pytest.approx(np.mean(per_prompt), abs=1e-12)
    assert chars["within_spearman_n"] == len(per_prompt)
    assert f"{chars['within_spearman']:.3f} within prompt" in md
    assert "punctuation, digits, Latin letters, spaces and line breaks are not counted" in md
    assert "t-intervals with prompts as clusters" in md and "bootstrap" not in md
    assert build_wpb_report(folder, seed=7, n_boot=300).to_markdown() == md  # deterministic


def test_report_needs_second_annotations(make_wpb: MakeWpb) -> None:
    with pytest.raises(ValueError, match="no row has score_alt"):
        build_wpb_report(make_wpb(n_prompts=4, n_models=3, alt_models=0), seed=0, n_boot=50)


@pytest.fixture(scope="module")
def real_report(real_wpb: Path) -> WpbReport:
    return build_wpb_report(real_wpb, seed=0, n_boot=1000)


@pytest.mark.slow
def test_real_agreement_matches_readme(real_report: WpbReport) -> None:
    agreement = real_report.agreement
    assert agreement.height == 6  # 5 doubly annotated models + overall
    overall = agreement.filter(pl.col("group") == "overall").row(0, named=True)
    assert overall["n"] == 1020
    assert round(100 * overall["exact"], 1) == 58.8  # README: 58.8%
    assert round(100 * overall["within_one"], 1) == 90.0  # README: 90.0%
    md = real_report.to_markdown()
    assert "exact 58.8%, within ±1 90.0%" in md
    assert round(overall["kappa"], 3) == 0.422  # issue 16: unweighted Cohen κ
    assert "Cohen κ 0.422 (unweighted)" in md


@pytest.mark.slow
def test_real_ranking_and_length(real_report: WpbReport) -> None:
    ranking = real_report.ranking
    assert ranking.height == 20 and ranking["rank"].to_list() == list(range(1, 21))
    assert ranking["mean"].is_sorted(descending=True)
    assert (ranking["lo"] <= ranking["mean"]).all() and (ranking["mean"] <= ranking["hi"]).all()
    assert ranking["tied_with_next"].null_count() == 1
    assert real_report.n_rows == 4079 and real_report.n_with_text == 3875
    assert real_report.length_bias["n_excluded"].to_list() == [204, 204]
    assert real_report.length_bias["n_groups"].to_list() == [204, 204]


@pytest.mark.slow
def test_real_within_prompt_spearman_against_scipy(real_wpb: Path,
                                                   real_report: WpbReport) -> None:
    rows = load_wpb(real_wpb).responses.filter(pl.col("cjk_chars").is_not_null())
    rhos = [stats.spearmanr(g["cjk_chars"], g["score"]).statistic
            for _, g in rows.group_by("question_id")
            if g["score"].n_unique() > 1 and g["cjk_chars"].n_unique() > 1]
    chars = real_report.length_bias.row(0, named=True)
    assert chars["within_spearman_n"] == len(rhos) >= 200
    assert chars["within_spearman"] == pytest.approx(np.mean(rhos), abs=1e-12)


@pytest.mark.slow
def test_real_length_tier_share_by_pair_counting(real_wpb: Path) -> None:
    items = tier_items(load_wpb(real_wpb)).filter(pl.col("cjk_chars").is_not_null())
    high = items.filter(pl.col("tier") == "high")["cjk_chars"].to_numpy()[:, None]
    low = items.filter(pl.col("tier") == "low")["cjk_chars"].to_numpy()[None, :]
    share = (np.sum(high > low) + 0.5 * np.sum(high == low)) / (high.size * low.size)
    table = tier_sensitivity(items, signal="cjk_chars")
    row = table.filter((pl.col("higher") == "high") & (pl.col("lower") == "low")).row(
        0, named=True)
    assert row["u_share"] == pytest.approx(share, abs=1e-12)
    assert (row["n_higher"], row["n_lower"]) == (high.size, low.size)
