"""Majority votes, voting scores and judge-vs-human ranking agreement, checked by hand."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from essaybench.human.voting import (
    canonical_pairs,
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
        "prompt_id": "p3", "sample_index": 0, "model_a": "m1", "model_b": "m2", "genre": None,
        "n_votes": 3,
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


def test_rank_agreement_needs_three_common_models() -> None:
    human = pl.DataFrame({"model": ["m1", "m2", "m3"], "score": [0.9, 0.5, 0.1]})
    judge = pl.DataFrame({"model": ["m1", "m2", "x"], "score": [1.0, 2.0, 3.0]})
    rho, tau = rank_agreement(human, judge)
    assert rho.n == 2 and math.isnan(rho.statistic) and math.isnan(tau.p_value)


def test_judge_scores_keeps_ok_rows_of_one_judge() -> None:
    judgments = pl.DataFrame({
        "judge": ["j1", "j1", "j1", "j2"], "prompt_id": ["p1", "p2", "p1", "p1"],
        "model": ["m1", "m1", "m2", "m1"],
        "genre": ["narrative"] * 4, "status": ["ok", "parse_error", "ok", "ok"],
        "score_weighted": [70.0, None, 60.0, 10.0], "align_total": [7.0, None, None, 1.0]})
    rows = judge_scores(judgments, "align_total", judge="j1")
    # m2's null align score is left out; no sample_index column: sample 0
    assert rows.rows() == [("p1", "m1", 0, "narrative", 7.0)]
    assert judge_scores(judgments, judge="j1")["score"].to_list() == [70.0, 60.0]
    with pytest.raises(ValueError, match="several judges"):
        judge_scores(judgments)
    with pytest.raises(ValueError, match="score_unweighted"):
        judge_scores(judgments, "score_unweighted", judge="j1")
