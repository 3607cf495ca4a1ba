from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from essaybench.bench.scoring import (
    AlignScore,
    EssayScore,
    TraitSpec,
    align_score,
    essay_score,
    trait_scores,
    weights,
)

# Shared hand-computed rubric: a shallow trait A (depth 0, 3 questions) and a
# deep trait B (depth 2, 2 questions).
A = TraitSpec("A", 0, ("a1", "a2", "a3"))
B = TraitSpec("B", 2, ("b1", "b2"))
TRAITS = (A, B)
SCORES: dict[str, int] = {"a1": 7, "a2": 8, "a3": 6, "b1": 4, "b2": 9}


def with_scores(**changes: int) -> dict[str, int]:
    return {**SCORES, **changes}


def all_at(value: int) -> dict[str, int]:
    return dict.fromkeys(SCORES, value)


# --- hand-computed cases ---------------------------------------------------------------


def test_trait_scores_by_hand() -> None:
    # S_A = 7 + 8 + 6 = 21; S_B = 4 + 9 = 13
    assert trait_scores(TRAITS, SCORES) == {"A": 21, "B": 13}


def test_weights_by_hand() -> None:
    # W = 3^d: 3^0 = 1, 3^2 = 9; with α = 2: 2^0 = 1, 2^2 = 4
    assert weights(TRAITS, 3.0) == {"A": 1.0, "B": 9.0}
    assert weights(TRAITS, 2) == {"A": 1.0, "B": 4.0}
    assert weights(TRAITS) == {"A": 1.0, "B": 9.0}  # default α = 3


def test_essay_score_by_hand() -> None:
    result = essay_score(TRAITS, SCORES)
    assert isinstance(result, EssayScore)
    # raw = 1·21 + 9·13 = 21 + 117 = 138
    # max = 1·(10·3) + 9·(10·2) = 30 + 180 = 210
    # total = 100 · 138 / 210 = 460/7 = 65.714285...
    assert result.weighted_sum == 138.0
    assert result.max_weighted_sum == 210.0
    assert result.total == pytest.approx(460 / 7, rel=1e-15)
    assert dict(result.trait_scores) == {"A": 21, "B": 13}
    assert dict(result.trait_weights) == {"A": 1.0, "B": 9.0}
    assert result.alpha == 3.0
    assert result.weighted is True


def test_essay_score_without_weights_by_hand() -> None:
    result = essay_score(TRAITS, SCORES, weighted=False)
    # raw = 21 + 13 = 34; max = 30 + 20 = 50; total = 100 · 34 / 50 = 68.0
    assert result.weighted_sum == 34.0
    assert result.max_weighted_sum == 50.0
    assert result.total == 68.0
    assert dict(result.trait_weights) == {"A": 1.0, "B": 1.0}
    assert result.weighted is False


def test_essay_score_other_alpha_and_depths_by_hand() -> None:
    traits = (TraitSpec("T", 1, ("x1",)), TraitSpec("U", 3, ("y1", "y2")))
    result = essay_score(traits, {"x1": 5, "y1": 10, "y2": 2}, alpha=2.0)
    # W_T = 2^1 = 2, W_U = 2^3 = 8; S_T = 5, S_U = 12
    # raw = 2·5 + 8·12 = 10 + 96 = 106; max = 2·10 + 8·20 = 20 + 160 = 180
    # total = 100 · 106 / 180 = 530/9 = 58.888...
    assert result.weighted_sum == 106.0
    assert result.max_weighted_sum == 180.0
    assert result.total == pytest.approx(530 / 9, rel=1e-15)


def test_all_tens_is_100() -> None:
    assert essay_score(TRAITS, all_at(10)).total == 100.0
    assert essay_score(TRAITS, all_at(10), weighted=False).total == 100.0


def test_all_ones_is_10_not_0() -> None:
    # The paper normalises against the maximum only:
    # raw = 1·3 + 9·2 = 21; max = 210; total = 100 · 21 / 210 = 10.0
    assert essay_score(TRAITS, all_at(1)).total == 10.0
    # unweighted: 5 / 50 → 10.0
    assert essay_score(TRAITS, all_at(1), weighted=False).total == 10.0


def test_alpha_one_equals_without_weights() -> None:
    for scores in (SCORES, all_at(1), all_at(10), with_scores(a2=1, b2=3)):
        at_one = essay_score(TRAITS, scores, alpha=1.0)
        unweighted = essay_score(TRAITS, scores, weighted=False)
        assert at_one.total == unweighted.total
        assert at_one.weighted_sum == unweighted.weighted_sum
        assert at_one.max_weighted_sum == unweighted.max_weighted_sum
        assert dict(at_one.trait_weights) == dict(unweighted.trait_weights)


def test_deep_trait_moves_score_more_than_shallow() -> None:
    base = essay_score(TRAITS, SCORES).total  # 138 / 210
    shallow = essay_score(TRAITS, with_scores(a1=8)).total  # raw 139 → 13900/210 = 66.1904...
    deep = essay_score(TRAITS, with_scores(b1=5)).total  # raw 147 → 14700/210 = 70.0
    # +1 on a depth-0 question adds 1·100/210 ≈ 0.476 points; on depth 2 adds 9·100/210 ≈ 4.286
    assert shallow - base == pytest.approx(100 / 210)
    assert deep - base == pytest.approx(900 / 210)
    assert deep == pytest.approx(70.0)
    assert deep - base > shallow - base
    # Without weights both moves are the same +1/50 = +2 points.
    flat_base = essay_score(TRAITS, SCORES, weighted=False).total
    assert essay_score(TRAITS, with_scores(a1=8), weighted=False).total - flat_base == (
        pytest.approx(2.0)
    )
    assert essay_score(TRAITS, with_scores(b1=5), weighted=False).total - flat_base == (
        pytest.approx(2.0)
    )


def test_invariant_to_trait_and_score_order() -> None:
    traits = (
        TraitSpec("p", 0, ("p1", "p2")),
        TraitSpec("q", 1, ("q1",)),
        TraitSpec("r", 2, ("r1", "r2", "r3")),
        TraitSpec("s", 3, ("s1", "s2")),
    )
    scores = {"p1": 3, "p2": 7, "q1": 10, "r1": 2, "r2": 5, "r3": 9, "s1": 6, "s2": 1}
    reference = essay_score(traits, scores, alpha=2.7)
    rng = np.random.default_rng(0)
    for _ in range(20):
        order = rng.permutation(len(traits))
        shuffled = tuple(traits[i] for i in order)
        keys = list(scores)
        rng.shuffle(keys)
        result = essay_score(shuffled, {k: scores[k] for k in keys}, alpha=2.7)
        # fsum makes this exact, not merely approximate
        assert result.total == reference.total
        assert result.weighted_sum == reference.weighted_sum
        assert dict(result.trait_scores) == dict(reference.trait_scores)


def test_numpy_integer_scores_are_accepted() -> None:
    scores = {k: np.int64(v) for k, v in SCORES.items()}
    assert essay_score(TRAITS, scores).total == pytest.approx(460 / 7)  # type: ignore[arg-type]


def test_result_is_immutable() -> None:
    result = essay_score(TRAITS, SCORES)
    with pytest.raises(AttributeError):
        result.total = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        result.trait_scores["A"] = 0  # type: ignore[index]


# --- randomised check against an independent computation -------------------------------


@pytest.mark.parametrize("weighted", [True, False])
def test_random_rubrics_match_numpy_dot(weighted: bool) -> None:
    for seed in range(200):
        rng = np.random.default_rng(seed)
        n_traits = int(rng.integers(1, 7))
        depths = rng.integers(0, 4, size=n_traits)
        counts = rng.integers(1, 6, size=n_traits)
        alpha = float(rng.uniform(0.25, 5.0))
        traits = [
            TraitSpec(f"t{t}", int(depths[t]), tuple(f"t{t}q{i}" for i in range(counts[t])))
            for t in range(n_traits)
        ]
        per_trait = [rng.integers(1, 11, size=int(c)) for c in counts]
        scores = {
            f"t{t}q{i}": int(v) for t, values in enumerate(per_trait) for i, v in enumerate(values)
        }

        w = alpha ** depths.astype(float) if weighted else np.ones(n_traits)
        s = np.array([values.sum() for values in per_trait], dtype=float)
        expected = 100.0 * np.dot(w, s) / np.dot(w, 10.0 * counts)

        result = essay_score(traits, scores, alpha=alpha, weighted=weighted)
        assert result.total == pytest.approx(expected, rel=1e-12), seed
        assert result.weighted_sum == pytest.approx(np.dot(w, s), rel=1e-12), seed
        assert 10.0 - 1e-9 <= result.total <= 100.0 + 1e-9, seed


# --- validation ----------------------------------------------------------------------


def test_missing_score_names_question() -> None:
    scores = dict(SCORES)
    del scores["b2"]
    with pytest.raises(ValueError, match=r"missing score for question 'b2'"):
        essay_score(TRAITS, scores)
    with pytest.raises(ValueError, match=r"'b2'"):
        trait_scores(TRAITS, scores)


def test_extra_score_id_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"not in any trait: 'zz'"):
        essay_score(TRAITS, with_scores(zz=5))


@pytest.mark.parametrize("bad", [0, 11, -3, 100])
def test_score_out_of_range(bad: int) -> None:
    with pytest.raises(ValueError, match=rf"question 'a2'.*{bad} is outside 1..10"):
        essay_score(TRAITS, with_scores(a2=bad))


@pytest.mark.parametrize("bad", [True, False, 7.0, 7.5, "7", None, math.nan])
def test_score_not_an_int(bad: object) -> None:
    scores: dict[str, object] = {**SCORES, "a2": bad}
    with pytest.raises(ValueError, match=r"question 'a2'.*must be an int"):
        essay_score(TRAITS, scores)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, 4, 10])
def test_depth_out_of_range(bad: int) -> None:
    with pytest.raises(ValueError, match=r"trait 'X': depth must be an int in 0..3"):
        TraitSpec("X", bad, ("x1",))


@pytest.mark.parametrize("bad", [True, 1.0])
def test_depth_not_an_int(bad: object) -> None:
    with pytest.raises(ValueError, match=r"depth must be an int"):
        TraitSpec("X", bad, ("x1",))  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, 0.0, -1.0, -3, math.nan, math.inf])
def test_alpha_must_be_positive_and_finite(bad: float) -> None:
    with pytest.raises(ValueError, match=r"alpha must be finite and > 0"):
        weights(TRAITS, bad)
    with pytest.raises(ValueError, match=r"alpha"):
        essay_score(TRAITS, SCORES, alpha=bad)
    with pytest.raises(ValueError, match=r"alpha"):
        essay_score(TRAITS, SCORES, alpha=bad, weighted=False)


def test_alpha_not_a_number() -> None:
    with pytest.raises(ValueError, match=r"alpha must be a real number"):
        weights(TRAITS, True)
    with pytest.raises(ValueError, match=r"alpha must be a real number"):
        weights(TRAITS, "3")  # type: ignore[arg-type]


def test_trait_without_questions() -> None:
    with pytest.raises(ValueError, match=r"trait 'X' has no questions"):
        TraitSpec("X", 0, ())


def test_question_ids_as_bare_string() -> None:
    with pytest.raises(ValueError, match=r"not a string"):
        TraitSpec("X", 0, "x1")  # type: ignore[arg-type]


def test_duplicate_question_across_traits() -> None:
    traits = (A, TraitSpec("C", 1, ("c1", "a2")))
    with pytest.raises(
        ValueError, match=r"question id 'a2' appears in both trait 'A' and trait 'C'"
    ):
        essay_score(traits, {**SCORES, "c1": 5})
    with pytest.raises(ValueError, match=r"'a2'"):
        weights(traits)


def test_duplicate_question_within_trait() -> None:
    with pytest.raises(ValueError, match=r"trait 'X': duplicate question id 'x1'"):
        TraitSpec("X", 0, ("x1", "x2", "x1"))


def test_duplicate_trait_id() -> None:
    with pytest.raises(ValueError, match=r"duplicate trait id 'A'"):
        essay_score((A, TraitSpec("A", 1, ("z1",))), {**SCORES, "z1": 3})


def test_no_traits() -> None:
    with pytest.raises(ValueError, match=r"no traits"):
        essay_score((), {})


def test_empty_trait_id() -> None:
    with pytest.raises(ValueError, match=r"trait_id must be a non-empty string"):
        TraitSpec("", 0, ("x1",))


# --- Align-Score baseline ------------------------------------------------------------


def test_align_score_by_hand() -> None:
    result = align_score({"relevance": 8, "fluency": 6, "creativity": 7}, overall=9)
    assert isinstance(result, AlignScore)
    # total = 9 · 10 = 90.0; dimension mean = (8 + 6 + 7) / 3 · 10 = 7 · 10 = 70.0
    assert result.total == 90.0
    assert result.dimension_mean == 70.0
    assert result.overall == 9
    assert dict(result.dimensions) == {"relevance": 8, "fluency": 6, "creativity": 7}


def test_align_score_extremes_and_non_integer_mean() -> None:
    assert align_score({"a": 1}, 1).total == 10.0
    assert align_score({"a": 10}, 10).total == 100.0
    # (8 + 5) / 2 · 10 = 6.5 · 10 = 65.0
    assert align_score({"a": 8, "b": 5}, 6).dimension_mean == 65.0


def test_align_score_validation() -> None:
    with pytest.raises(ValueError, match=r"at least one dimension"):
        align_score({}, 5)
    with pytest.raises(ValueError, match=r"overall.*11 is outside"):
        align_score({"a": 5}, 11)
    with pytest.raises(ValueError, match=r"overall.*must be an int"):
        align_score({"a": 5}, True)
    with pytest.raises(ValueError, match=r"dimension 'b'.*0 is outside"):
        align_score({"a": 5, "b": 0}, 5)
    with pytest.raises(ValueError, match=r"dimension 'a'.*must be an int"):
        align_score({"a": 5.0}, 5)  # type: ignore[dict-item]


def test_trait_scorer_equals_essay_score_both_ways() -> None:
    from essaybench.bench.scoring import TraitScorer

    for alpha in (3.0, 2.0, 1.0):
        weighted, unweighted = TraitScorer(TRAITS, alpha).scores(SCORES)
        assert weighted == essay_score(TRAITS, SCORES, alpha=alpha)
        assert unweighted == essay_score(TRAITS, SCORES, alpha=alpha, weighted=False)
    with pytest.raises(ValueError, match="score"):
        TraitScorer(TRAITS).scores({**SCORES, next(iter(SCORES)): 11})
    with pytest.raises(ValueError, match="score"):
        TraitScorer(TRAITS).scores({**SCORES, next(iter(SCORES)): True})


def test_trait_scorer_equals_essay_score_on_many_essays_and_alphas() -> None:
    """The scorer precomputes weights and the maximum: every field of every result still
    equals essay_score's, for α whose powers are not exact too; errors name the id."""
    from essaybench.bench.scoring import TraitScorer

    traits = (A, B, TraitSpec("C", 3, ("c1", "c2", "c3", "c4")), TraitSpec("D", 1, ("d1",)))
    ids = [qid for t in traits for qid in t.question_ids]
    rng = np.random.default_rng(5)
    for alpha in (3.0, 2.5, 1.7, 0.3, 1.0):
        scorer = TraitScorer(traits, alpha)
        for _ in range(50):
            scores = {qid: int(v) for qid, v in zip(ids, rng.integers(1, 11, len(ids)),
                                                    strict=True)}
            weighted, unweighted = scorer.scores(scores)
            assert weighted == essay_score(traits, scores, alpha=alpha)
            assert unweighted == essay_score(traits, scores, alpha=alpha, weighted=False)
    scorer = TraitScorer(traits)
    full: dict[str, Any] = dict.fromkeys(ids, 5)
    cases: list[tuple[dict[str, Any], str]] = [
        ({**full, "zz": 1, "aa": 2}, r"not in any trait: 'aa', 'zz'"),
        ({k: v for k, v in full.items() if k != "c2"}, r"'c2' \(trait 'C'\)"),
        ({**full, "c3": 0}, r"question 'c3'.*0 is outside"),
        ({**full, "d1": 5.0}, r"question 'd1'.*must be an int")]
    for bad, match in cases:
        with pytest.raises(ValueError, match=match):
            scorer.scores(bad)
        with pytest.raises(ValueError, match=match):
            trait_scores(traits, bad)
