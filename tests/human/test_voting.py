"""Majority votes, voting scores and judge-vs-human ranking agreement, checked by hand."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy import stats

from essaybench.human.voting import (
    canonical_pairs,
    judge_human_agreement,
    judge_human_agreement_absolute,
    judge_scores,
    majority_votes,
    pairwise_fleiss,
    rank_agreement,
    voting_scores,
)


def ann(rows: list[tuple[str, str, str, str, str]], genre: dict[str, str] | None = None
        ) -> pl.DataFrame:
    genre = genre or {}
    return pl.DataFrame(
        [{"prompt_id": p, "model_a": a, "model_b": b, "annotator": who, "verdict": v,
          "genre": genre.get(p)} for p, a, b, who, v in rows],
        schema={"prompt_id": pl.Utf8, "model_a": pl.Utf8, "model_b": pl.Utf8,
                "annotator": pl.Utf8, "verdict": pl.Utf8, "genre": pl.Utf8})


def three(prompt: str, a: str, b: str, verdicts: str) -> list[tuple[str, str, str, str, str]]:
    names = {"a": "A", "b": "B", "t": "tie"}
    return [(prompt, a, b, f"r{k}", names[v]) for k, v in enumerate(verdicts)]


def test_canonical_orientation_flips_verdicts() -> None:
    df = canonical_pairs(ann([("p", "m2", "m1", "r", "A"), ("p", "m2", "m1", "s", "tie"),
                              ("p", "m1", "m2", "t", "A")]))
    assert df.select("model_a", "model_b").unique().rows() == [("m1", "m2")]
    assert df["verdict"].to_list() == ["B", "tie", "A"]
    with pytest.raises(ValueError, match="A, B or tie"):
        canonical_pairs(ann([("p", "m1", "m2", "r", "a")]))


def test_majority_vote_outcomes() -> None:
    rows = (three("p1", "m1", "m2", "aab") + three("p2", "m1", "m2", "abt")
            + three("p3", "m2", "m1", "aat")  # reversed: m2 wins → B for (m1, m2)
            + [("p4", "m1", "m2", "r0", "A"), ("p4", "m1", "m2", "r1", "B")])
    votes = majority_votes(ann(rows))
    assert votes["outcome"].to_list() == ["A", "tie", "B", "tie"]
    assert votes.row(2, named=True) == {
        "prompt_id": "p3", "model_a": "m1", "model_b": "m2", "genre": None, "n_votes": 3,
        "votes_a": 0, "votes_b": 2, "votes_tie": 1, "outcome": "B"}


def test_voting_scores_by_hand() -> None:
    # m1 beats m2 twice, ties m3, loses to m3 once; m2 beats m3 once.
    rows = (three("p1", "m1", "m2", "aaa") + three("p2", "m2", "m1", "bbt")
            + three("p1", "m1", "m3", "att") + three("p2", "m3", "m1", "aab")
            + three("p1", "m2", "m3", "aab"))
    table = voting_scores(majority_votes(ann(rows)))
    by_model = {r["model"]: r for r in table.iter_rows(named=True)}
    assert (by_model["m1"]["wins"], by_model["m1"]["losses"], by_model["m1"]["ties"]) == (2, 1, 1)
    assert by_model["m1"]["score"] == pytest.approx(2.5 / 4)
    assert by_model["m2"]["score"] == pytest.approx(1 / 3)
    assert by_model["m3"]["score"] == pytest.approx(1.5 / 3)
    assert table["model"].to_list() == ["m1", "m3", "m2"]
    assert table["rank"].to_list() == [1, 2, 3]


def test_pairwise_fleiss_on_canonical_verdicts() -> None:
    rows = (three("p1", "m1", "m2", "aab") + three("p2", "m2", "m1", "bbb")
            + three("p3", "m1", "m2", "ttb") + three("p4", "m1", "m3", "abt"))
    # Canonical labels per item (p2 flips to A A A); textbook Fleiss by hand:
    table = np.array([[2, 1, 0], [3, 0, 0], [0, 1, 2], [1, 1, 1]], dtype=float)
    p_i = ((table ** 2).sum(axis=1) - 3) / 6
    p_j = table.sum(axis=0) / 12
    expected = (p_i.mean() - (p_j ** 2).sum()) / (1 - (p_j ** 2).sum())
    result = pairwise_fleiss(ann(rows))
    assert result.kappa == pytest.approx(expected, abs=1e-12)
    assert (result.n_items, result.n_raters) == (4, 3)


def judge_rows(scores: dict[tuple[str, str], list[float]]) -> pl.DataFrame:
    return pl.DataFrame([{"model": m, "genre": g, "score": s}
                         for (m, g), values in scores.items() for s in values])


def test_judge_human_agreement_overall_and_per_genre() -> None:
    genre = {"p1": "narrative", "p2": "narrative", "p3": "expository"}
    models = ["m1", "m2", "m3", "m4"]
    rows = []
    for p in ("p1", "p2", "p3"):
        for i, a in enumerate(models):
            for b in models[i + 1:]:
                # Humans prefer the lower-numbered model, except m4 > m3 on p3.
                verdicts = "bbb" if (p, a, b) == ("p3", "m3", "m4") else "aat"
                rows += three(p, a, b, verdicts)
    judge = judge_rows({("m1", "narrative"): [80, 90], ("m2", "narrative"): [70],
                        ("m3", "narrative"): [75], ("m4", "narrative"): [10],
                        ("m1", "expository"): [60], ("m2", "expository"): [50],
                        ("m3", "expository"): [40], ("m4", "expository"): [45]})
    out = judge_human_agreement(ann(rows, genre), judge)
    assert out["scope"].to_list() == ["overall", "expository", "narrative"]
    by_scope = {r["scope"]: r for r in out.iter_rows(named=True)}
    # Narrative: human m1 > m2 > m3 > m4; judge means 85, 70, 75, 10.
    rho = stats.pearsonr(stats.rankdata([4, 3, 2, 1]), stats.rankdata([85, 70, 75, 10]))[0]
    assert by_scope["narrative"]["spearman"] == pytest.approx(rho)
    assert by_scope["narrative"]["kendall"] == pytest.approx((5 - 1) / 6)
    # Expository: human m1 > m2 > m4 > m3 (m4 won its p3 duel), judge 60, 50, 40, 45.
    assert by_scope["expository"]["spearman"] == pytest.approx(1.0)
    assert by_scope["expository"]["n_human_rows"] == 6
    # Overall: judge means over all rows of a model; human over all 18 votes.
    human = voting_scores(majority_votes(ann(rows, genre)))
    judge_means = judge.group_by("model").agg(pl.col("score").mean())
    both = human.join(judge_means, on="model", suffix="_judge").sort("model")
    expected = stats.spearmanr(both["score"], both["score_judge"]).statistic
    assert by_scope["overall"]["spearman"] == pytest.approx(expected)
    assert by_scope["overall"]["n_models"] == 4


def test_rank_agreement_needs_three_common_models() -> None:
    human = pl.DataFrame({"model": ["m1", "m2", "m3"], "score": [0.9, 0.5, 0.1]})
    judge = pl.DataFrame({"model": ["m1", "m2", "x"], "score": [1.0, 2.0, 3.0]})
    rho, tau = rank_agreement(human, judge)
    assert rho.n == 2 and math.isnan(rho.statistic) and math.isnan(tau.p_value)


def test_judge_scores_keeps_ok_rows_of_one_judge() -> None:
    judgments = pl.DataFrame({
        "judge": ["j1", "j1", "j1", "j2"], "model": ["m1", "m1", "m2", "m1"],
        "genre": ["narrative"] * 4, "status": ["ok", "parse_error", "ok", "ok"],
        "score_weighted": [70.0, None, 60.0, 10.0], "align_total": [7.0, None, None, 1.0]})
    rows = judge_scores(judgments, "align_total", judge="j1")
    assert rows.rows() == [("m1", "narrative", 7.0)]  # m2's null align score is left out
    assert judge_scores(judgments, judge="j1")["score"].to_list() == [70.0, 60.0]
    with pytest.raises(ValueError, match="several judges"):
        judge_scores(judgments)
    with pytest.raises(ValueError, match="score_unweighted"):
        judge_scores(judgments, "score_unweighted", judge="j1")


def test_judge_human_agreement_absolute_uses_mean_human_scores() -> None:
    absolute = pl.DataFrame({
        "prompt_id": ["p1", "p1", "p1", "p1", "p2", "p2", "p2"],
        "model": ["m1", "m1", "m2", "m3", "m1", "m2", "m3"],
        "annotator": ["a", "b", "a", "a", "a", "a", "a"],
        "score": [3.0, 1.0, 3.0, 0.0, 2.0, 2.0, 1.0],
        "genre": ["narrative"] * 4 + ["expository"] * 3})
    judge = judge_rows({("m1", "narrative"): [5], ("m2", "narrative"): [9],
                        ("m3", "narrative"): [1], ("m1", "expository"): [4],
                        ("m2", "expository"): [3], ("m3", "expository"): [2]})
    out = {r["scope"]: r for r in
           judge_human_agreement_absolute(absolute, judge).iter_rows(named=True)}
    # Narrative human means m1 2, m2 3, m3 0 vs judge 5, 9, 1: same order.
    assert out["narrative"]["spearman"] == pytest.approx(1.0)
    # Overall human means m1 2, m2 2.5, m3 0.5; judge means 4.5, 6, 1.5.
    assert out["overall"]["kendall"] == pytest.approx(1.0)
    # Expository: human m1 = m2 = 2 > m3 = 1; judge 4 > 3 > 2.
    expected = stats.spearmanr([2.0, 2.0, 1.0], [4.0, 3.0, 2.0]).statistic
    assert out["expository"]["spearman"] == pytest.approx(expected)
    assert out["overall"]["n_human_rows"] == 7
