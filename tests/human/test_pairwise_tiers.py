"""Quality tiers from pairwise annotations (issue 16, item 2): voting-based scores → the
top-, median- and bottom-ranked essay of each prompt → Mann–Whitney against scipy."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import polars as pl
import pytest
from scipy import stats

from essaybench.bench.agreement_tables import AgreementParams, Tiers, build_agreement_tables
from essaybench.human.pairwise_tiers import (
    TOP_MEDIAN_BOTTOM,
    essay_voting_scores,
    pairwise_tiers,
)
from essaybench.human.voting import majority_votes


def votes_from(wins: dict[str, dict[tuple[str, str], str]]) -> pl.DataFrame:
    """Majority votes of three annotators who all give ``wins[prompt][(a, b)]``."""
    return majority_votes(pl.DataFrame(
        [{"prompt_id": p, "model_a": a, "model_b": b, "annotator": who, "verdict": v}
         for p, pairs in wins.items() for (a, b), v in pairs.items() for who in "xyz"]))


def ordered(models: list[str], ties: frozenset[tuple[str, str]] = frozenset()
            ) -> dict[tuple[str, str], str]:
    """Every pair decided by the order of ``models`` (best first), except ``ties``."""
    return {(a, b): "tie" if (a, b) in ties else "A" for a, b in combinations(models, 2)}


def test_voting_scores_and_ranks_per_prompt() -> None:
    table = essay_voting_scores(votes_from({
        "p1": ordered(["m1", "m2", "m3"]),
        "p2": ordered(["m3", "m1", "m2"], ties=frozenset({("m3", "m1")}))}))
    got = {(r["prompt_id"], r["model"]): (r["score"], r["rank"])
           for r in table.iter_rows(named=True)}
    assert got == {("p1", "m1"): (1.0, 1), ("p1", "m2"): (0.5, 2), ("p1", "m3"): (0.0, 3),
                   # p2: m3 ties m1 and beats m2; m1 ties m3 and beats m2 → both 0.75, rank 1
                   ("p2", "m3"): (0.75, 1), ("p2", "m1"): (0.75, 1), ("p2", "m2"): (0.0, 3)}


def test_top_median_bottom_picks_the_paper_essays() -> None:
    seven = [f"m{k}" for k in range(7)]
    six = [f"m{k}" for k in range(6)]
    tiers = pairwise_tiers(votes_from({
        "odd": ordered(seven), "even": ordered(six),
        "flat": {(a, b): "tie" for a, b in combinations(seven[:3], 2)}}), TOP_MEDIAN_BOTTOM)
    tier = {(r["prompt_id"], r["model"]): r["tier"] for r in tiers.iter_rows(named=True)}
    # 7 essays: the 1st, the 4th and the 7th; 6 essays: both middle ones (3rd and 4th).
    assert [m for m in seven if tier[("odd", m)] is not None] == ["m0", "m3", "m6"]
    assert [tier[("odd", m)] for m in ("m0", "m3", "m6")] == ["high", "medium", "low"]
    assert {m for m in six if tier[("even", m)] == "medium"} == {"m2", "m3"}
    assert all(tier[("flat", m)] is None for m in seven[:3])  # all tied: no tiers


def test_rank_sets_use_the_within_prompt_rank() -> None:
    seven = [f"m{k}" for k in range(7)]
    tiers = pairwise_tiers(votes_from({"p": ordered(seven)}),
                           ((1, 2), (3, 4, 5), (6, 7)))
    assert tiers.sort("rank")["tier"].to_list() == ["high"] * 2 + ["medium"] * 3 + ["low"] * 2


def test_the_judge_separating_pairwise_tiers_against_scipy() -> None:
    """20 prompts, 7 models, humans ordering them by a noisy latent quality; the judge
    scores essays with its own noise. The sensitivity table's U for each tier pair equals
    scipy's mannwhitneyu on the judge scores of the essays picked here by hand."""
    rng = np.random.default_rng(2)
    models = [f"m{k}" for k in range(7)]
    rows: list[dict[str, object]] = []
    judged: list[dict[str, object]] = []
    picked: dict[str, list[float]] = {"high": [], "medium": [], "low": []}
    for i in range(20):
        p = f"p{i:02d}"
        latent = dict(zip(models, rng.normal(0, 1, 7), strict=True))
        best_first = sorted(models, key=lambda m: -latent[m])  # no ties: all pairs decided
        for a, b in combinations(best_first, 2):
            rows += [{"prompt_id": p, "model_a": b, "model_b": a, "annotator": who,
                      "verdict": "B"} for who in "xyz"]  # listed the other way round
        scores = {m: 50 + 10 * latent[m] + rng.normal(0, 8) for m in models}
        judged += [{"judge": "j", "prompt_id": p, "model": m, "sample_index": 0,
                    "genre": "narrative", "status": "ok", "score_weighted": s}
                   for m, s in scores.items()]
        for tier, m in zip(("high", "medium", "low"), (best_first[0], best_first[3],
                                                        best_first[6]), strict=True):
            picked[tier].append(scores[m])
    params = AgreementParams(annotations="x.jsonl", kind="pairwise", tiers="top/median/bottom")
    table = build_agreement_tables(pl.DataFrame(rows), pl.DataFrame(judged), params)
    sens = table["sensitivity"]
    assert sens["variant"].unique().to_list() == ["weighted"]
    for high, low in (("high", "medium"), ("medium", "low"), ("high", "low")):
        got = sens.filter((pl.col("higher") == high) & (pl.col("lower") == low)).row(
            0, named=True)
        expected = stats.mannwhitneyu(picked[high], picked[low], alternative="greater")
        assert got["u_statistic"] == pytest.approx(expected.statistic)
        assert got["p_value"] == pytest.approx(expected.pvalue)
        assert got["u_share"] == pytest.approx(expected.statistic / 400)
        assert (got["n_higher"], got["n_lower"]) == (20, 20)
        assert got["mean_diff"] == pytest.approx(np.mean(picked[high]) - np.mean(picked[low]))


def test_tier_values_are_checked_for_the_kind() -> None:
    with pytest.raises(ValueError, match="pairwise annotations only"):
        AgreementParams(annotations="x.csv", kind="absolute", tiers="top/median/bottom")
    with pytest.raises(ValueError, match="within-prompt ranks"):
        AgreementParams(annotations="x.jsonl", kind="pairwise",
                        tiers=Tiers(high=(1,), medium=(2.5,), low=(7,)))
    with pytest.raises(ValueError, match="tiers overlap"):
        Tiers(high=(1,), medium=(1, 2), low=(3,))
    ranks = AgreementParams(annotations="x.jsonl", kind="pairwise",
                            tiers=Tiers(high=(1,), medium=(4,), low=(7,)))
    assert isinstance(ranks.tiers, Tiers)
