"""Pure essay-scoring arithmetic: trait scores, depth weights, the 0–100 essay score.

EssayBench (Gao et al., 2025):

- trait score   S_t = Σ_i q_i           (each sub-question q_i is an int in 1..10)
- trait weight  W_t = α^d               (d = trait depth 0..3; α = 3 in the paper)
- essay score   100 · Σ_t W_t·S_t / Σ_t W_t·(10·n_t)     (n_t = sub-questions of t)

Normalisation is against the maximum only, as in the paper, so the lowest
possible essay (every sub-question at 1) scores 10.0, not 0.0. The "w/o WT"
ablation sets every W_t = 1 (``weighted=False``); α = 1 gives the same numbers.

The Align-Score baseline (AlignBench-style direct scoring) reports the judge's
overall 1–10 rating × 10 as the essay score; the mean of its dimension
ratings × 10 is exposed beside it for comparison.

Nothing here imputes: a missing, extra or out-of-range judgment raises
``ValueError`` so a failed judgment can never turn into a number.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "DEFAULT_ALPHA",
    "MAX_DEPTH",
    "MAX_SCORE",
    "MIN_SCORE",
    "AlignScore",
    "EssayScore",
    "TraitScorer",
    "TraitSpec",
    "align_score",
    "essay_score",
    "trait_scores",
    "weights",
]

MIN_SCORE = 1
MAX_SCORE = 10
MAX_DEPTH = 3
DEFAULT_ALPHA = 3.0


def _is_int(value: object) -> bool:
    # bool is an int subclass, but True as a judge score is a parsing bug, not a 1.
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass(frozen=True)
class TraitSpec:
    """The scoring-relevant part of a rubric trait (kept local: no rubric-loader import)."""

    trait_id: str
    depth: int
    question_ids: tuple[str, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.trait_id, str) or not self.trait_id:
            raise ValueError(f"trait_id must be a non-empty string, got {self.trait_id!r}")
        if not _is_int(self.depth) or not 0 <= self.depth <= MAX_DEPTH:
            raise ValueError(
                f"trait {self.trait_id!r}: depth must be an int in 0..{MAX_DEPTH}, "
                f"got {self.depth!r}"
            )
        if isinstance(self.question_ids, str):
            # A bare string would silently iterate as one question per character.
            raise ValueError(
                f"trait {self.trait_id!r}: question_ids must be a tuple of ids, not a string"
            )
        if len(self.question_ids) == 0:
            raise ValueError(f"trait {self.trait_id!r} has no questions")
        seen: set[str] = set()
        for qid in self.question_ids:
            if not isinstance(qid, str) or not qid:
                raise ValueError(
                    f"trait {self.trait_id!r}: question id must be a non-empty string, got {qid!r}"
                )
            if qid in seen:
                raise ValueError(f"trait {self.trait_id!r}: duplicate question id {qid!r}")
            seen.add(qid)


@dataclass(frozen=True)
class EssayScore:
    """One essay's rubric score; ``total`` is on 0–100 (10.0 minimum, see module doc)."""

    total: float
    weighted_sum: float
    max_weighted_sum: float
    trait_scores: Mapping[str, int]
    trait_weights: Mapping[str, float]
    alpha: float
    weighted: bool


@dataclass(frozen=True)
class AlignScore:
    """Align-Score baseline: ``total`` = overall × 10; ``dimension_mean`` = mean × 10."""

    total: float
    dimension_mean: float
    overall: int
    dimensions: Mapping[str, int]


def _check_traits(traits: Sequence[TraitSpec]) -> None:
    if len(traits) == 0:
        raise ValueError("no traits given")
    trait_ids: set[str] = set()
    owner: dict[str, str] = {}
    for trait in traits:
        if not isinstance(trait, TraitSpec):
            raise ValueError(f"expected TraitSpec, got {type(trait).__name__}")
        if trait.trait_id in trait_ids:
            raise ValueError(f"duplicate trait id {trait.trait_id!r}")
        trait_ids.add(trait.trait_id)
        for qid in trait.question_ids:
            if qid in owner:
                raise ValueError(
                    f"question id {qid!r} appears in both trait {owner[qid]!r} "
                    f"and trait {trait.trait_id!r}"
                )
            owner[qid] = trait.trait_id


def _check_alpha(alpha: float) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
        raise ValueError(f"alpha must be a real number, got {alpha!r}")
    if not math.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"alpha must be finite and > 0, got {alpha!r}")


def _check_score(value: object, what: str) -> int:
    if type(value) is int and MIN_SCORE <= value <= MAX_SCORE:  # the common case, fast
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{what}: score must be an int in {MIN_SCORE}..{MAX_SCORE}, got {value!r}")
    as_int = int(value)
    if not MIN_SCORE <= as_int <= MAX_SCORE:
        raise ValueError(f"{what}: score {as_int} is outside {MIN_SCORE}..{MAX_SCORE}")
    return as_int


def trait_scores(traits: Sequence[TraitSpec], scores: Mapping[str, int]) -> dict[str, int]:
    """S_t = Σ_i q_i per trait; every question must be scored and no other id may appear."""
    _check_traits(traits)
    return _sums(traits, frozenset(qid for trait in traits for qid in trait.question_ids),
                 scores)


def _sums(traits: Sequence[TraitSpec], known: frozenset[str],
          scores: Mapping[str, int]) -> dict[str, int]:
    if not known.issuperset(scores):
        extra = sorted(str(qid) for qid in scores if qid not in known)
        raise ValueError(f"score ids not in any trait: {', '.join(map(repr, extra))}")
    result: dict[str, int] = {}
    for trait in traits:
        total = 0
        for qid in trait.question_ids:
            if qid not in scores:
                raise ValueError(f"missing score for question {qid!r} (trait {trait.trait_id!r})")
            value = scores[qid]
            # The common case inline: _check_score's message would be formatted for every
            # question of every judgment (~240k at the paper's scale) only to be dropped.
            if type(value) is not int or not MIN_SCORE <= value <= MAX_SCORE:
                value = _check_score(value, f"question {qid!r}")
            total += value
        result[trait.trait_id] = total
    return result


def weights(traits: Sequence[TraitSpec], alpha: float = DEFAULT_ALPHA) -> dict[str, float]:
    """W_t = α^d per trait."""
    _check_traits(traits)
    _check_alpha(alpha)
    return {trait.trait_id: float(alpha) ** trait.depth for trait in traits}


def essay_score(
    traits: Sequence[TraitSpec],
    scores: Mapping[str, int],
    alpha: float = DEFAULT_ALPHA,
    weighted: bool = True,
) -> EssayScore:
    """The 0–100 essay score; ``weighted=False`` is the paper's "w/o WT" ablation."""
    _check_alpha(alpha)  # even when unweighted: a bad config should fail loudly
    s_t = trait_scores(traits, scores)
    w_t = weights(traits, alpha) if weighted else {t.trait_id: 1.0 for t in traits}
    return _from_trait_scores(traits, MappingProxyType(s_t), MappingProxyType(w_t),
                              _max_sum(traits, w_t), alpha, weighted)


class TraitScorer:
    """(weighted, unweighted) scores of many essays of one genre, each equal to
    :func:`essay_score`'s: traits, α, weights and the maximum checked and computed once,
    the trait sums once per essay for both variants."""

    def __init__(self, traits: Sequence[TraitSpec], alpha: float = DEFAULT_ALPHA) -> None:
        _check_alpha(alpha)
        _check_traits(traits)
        self.traits = tuple(traits)
        self.alpha = alpha
        self.known = frozenset(qid for trait in traits for qid in trait.question_ids)
        # Read-only views, shared by every EssayScore this scorer returns.
        self.weighted = MappingProxyType(weights(traits, alpha))
        self.unweighted = MappingProxyType({t.trait_id: 1.0 for t in traits})
        self._best_weighted = _max_sum(self.traits, self.weighted)
        self._best_unweighted = _max_sum(self.traits, self.unweighted)

    def scores(self, scores: Mapping[str, int]) -> tuple[EssayScore, EssayScore]:
        s_t = MappingProxyType(_sums(self.traits, self.known, scores))
        return (_from_trait_scores(self.traits, s_t, self.weighted, self._best_weighted,
                                   self.alpha, True),
                _from_trait_scores(self.traits, s_t, self.unweighted, self._best_unweighted,
                                   self.alpha, False))


def _max_sum(traits: Sequence[TraitSpec], w_t: Mapping[str, float]) -> float:
    """Σ_t W_t·(10·n_t): the weighted sum of an essay with every sub-question at 10."""
    return math.fsum([w_t[t.trait_id] * MAX_SCORE * len(t.question_ids) for t in traits])


def _from_trait_scores(traits: Sequence[TraitSpec], s_t: Mapping[str, int],
                       w_t: Mapping[str, float], best: float, alpha: float,
                       weighted: bool) -> EssayScore:
    """``s_t`` and ``w_t`` are read-only views, kept as they are in the result."""
    # fsum is correctly rounded, so the result does not depend on trait order.
    raw = math.fsum([w_t[t.trait_id] * s_t[t.trait_id] for t in traits])
    return EssayScore(
        total=100.0 * raw / best,
        weighted_sum=raw,
        max_weighted_sum=best,
        trait_scores=s_t,
        trait_weights=w_t,
        alpha=float(alpha),
        weighted=weighted,
    )


def align_score(dimensions: Mapping[str, int], overall: int) -> AlignScore:
    """Align-Score baseline from dimension ratings and an overall rating (all 1–10)."""
    if len(dimensions) == 0:
        raise ValueError("align_score needs at least one dimension score")
    dims = {name: _check_score(value, f"dimension {name!r}") for name, value in dimensions.items()}
    overall_int = _check_score(overall, "overall")
    return AlignScore(
        total=10.0 * overall_int,
        dimension_mean=10.0 * math.fsum(dims.values()) / len(dims),
        overall=overall_int,
        dimensions=MappingProxyType(dims),
    )
