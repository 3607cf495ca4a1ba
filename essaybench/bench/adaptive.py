"""Adaptive sampling's decisions: after each round, is model A better than B, and has
each model changed since the last comparable run? (issue 26 item 3)

Each question is a paired difference, prompt by prompt: ``first − second`` of two
models' scores (a pair), or of one model's score now and in the last comparable run (a
change). A prompt is the unit: several essays or judges of one prompt are averaged into
one 0–100 score per (prompt, model) before they get here
(:func:`essaybench.stats.confseq.cluster_means`); a prompt missing either side (a failed
judgment) is skipped for that question. Each difference (on −100…100) gets an anytime-
valid confidence sequence (betting, :mod:`essaybench.stats.confseq_betting`, by default;
or empirical Bernstein, :mod:`essaybench.stats.confseq`) over the prompts in their
sampling order, and the question is decided when the sequence

* lies above 0: "A better" / "changed up"; below 0: "B better" / "changed down";
* lies inside ±``min_effect`` (when > 0): "equivalent" / "no change" — the difference is
  smaller than the smallest one of interest;
* otherwise it is undecided.

What the decisions mean: the estimand is the mean difference over the population of
prompts the prompt set was drawn from (as with the cluster t-intervals of the report);
the prompts come in a uniformly random order, so every prefix is again a random sample
of it. Each decision is wrong with probability ≤ alpha (``alpha_per="run"``: the run has
no wrong decision with probability ≥ 1 − alpha) however many rounds were looked at and
whenever the run stopped. The sequences are intersected over time, so a decision once
made is never withdrawn. Skipping failed prompts assumes failures unrelated to the score.

Tuning (``horizon``, ``truncation``; fixed before the run, the guarantee holds for any
choice): bets tuned to the sample size a run hopes to stop at, and a higher cap on them,
narrow the sequences there by about a fifth on the benchmark's differences
(:mod:`essaybench.stats.confseq_betting`). What the decisions can and cannot match of a
full run's is measured in docs/benchmarks.md (cost at equal power).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import combinations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from essaybench.stats.confseq import DEFAULT_TRUNCATION, difference_confseq
from essaybench.stats.confseq_betting import DEFAULT_GRID, betting_difference_confseq

__all__ = [
    "AdaptiveOutcome", "AdaptiveQuestion", "QuestionKind", "QuestionStatus", "decide",
    "questions",
]

FloatArray = NDArray[np.float64]


class QuestionKind(StrEnum):
    PAIR = "pair"  # first − second: two models, this run
    CHANGE = "change"  # first − second: one model, this run − its last comparable run


class AdaptiveOutcome(StrEnum):
    FIRST_BETTER = "first_better"
    SECOND_BETTER = "second_better"
    WITHIN_EFFECT = "within_effect"
    UNDECIDED = "undecided"


_LABELS = {
    (QuestionKind.PAIR, AdaptiveOutcome.FIRST_BETTER): "{first} better",
    (QuestionKind.PAIR, AdaptiveOutcome.SECOND_BETTER): "{second} better",
    (QuestionKind.PAIR, AdaptiveOutcome.WITHIN_EFFECT): "equivalent",
    (QuestionKind.CHANGE, AdaptiveOutcome.FIRST_BETTER): "changed up",
    (QuestionKind.CHANGE, AdaptiveOutcome.SECOND_BETTER): "changed down",
    (QuestionKind.CHANGE, AdaptiveOutcome.WITHIN_EFFECT): "no change",
}


@dataclass(frozen=True)
class AdaptiveQuestion:
    """first − second; for a change both name the model (second = its last run)."""

    kind: QuestionKind
    first: str
    second: str

    def label(self, outcome: AdaptiveOutcome) -> str:
        text = _LABELS.get((self.kind, outcome), "undecided")
        return text.format(first=self.first, second=self.second)


@dataclass(frozen=True)
class QuestionStatus:
    """Where a question stands: decided at which round (1-based) and after how many
    sampled prompts, on how many paired observations, with the sequence's bounds then
    (or, undecided, at the last round)."""

    question: AdaptiveQuestion
    outcome: AdaptiveOutcome
    decided_round: int | None
    decided_at_prompts: int | None
    n_obs: int
    estimate: float
    lo: float
    hi: float
    alpha: float

    @property
    def label(self) -> str:
        return self.question.label(self.outcome)

    @property
    def decided(self) -> bool:
        return self.outcome is not AdaptiveOutcome.UNDECIDED


def questions(models: Sequence[str], *, changes: bool,
              pairs_too: bool = True) -> tuple[AdaptiveQuestion, ...]:
    """Every pair of models (in the given order) unless not ``pairs_too``, then each
    model's change if asked."""
    if len(set(models)) != len(models):
        raise ValueError("model names must be unique")
    pairs = [AdaptiveQuestion(QuestionKind.PAIR, a, b)
             for a, b in combinations(models, 2)] if pairs_too else []
    moved = [AdaptiveQuestion(QuestionKind.CHANGE, m, m) for m in models] if changes else []
    return (*pairs, *moved)


def _outcomes(lo: FloatArray, hi: FloatArray, min_effect: float) -> NDArray[np.int8]:
    """0 undecided, 1 first better, 2 second better, 3 within ±min_effect."""
    out = np.zeros(lo.shape, dtype=np.int8)
    if min_effect > 0:
        out[(lo >= -min_effect) & (hi <= min_effect)] = 3
    out[hi < 0] = 2
    out[lo > 0] = 1  # a decided direction says more than "small": it wins
    return out


_CODES = (AdaptiveOutcome.UNDECIDED, AdaptiveOutcome.FIRST_BETTER,
          AdaptiveOutcome.SECOND_BETTER, AdaptiveOutcome.WITHIN_EFFECT)


def decide(scores: ArrayLike, models: Sequence[str], *, round_ends: Sequence[int],
           alpha: float, min_effect: float = 0.0, alpha_per: str = "question",
           method: str = "betting", last: ArrayLike | None = None,
           ask: str = "all", horizon: int | None = None,
           truncation: float = DEFAULT_TRUNCATION,
           grid: int = DEFAULT_GRID) -> tuple[QuestionStatus, ...]:
    """The status of every question after the rounds seen so far.

    scores: (n_prompts, n_models) per-prompt 0–100 scores in sampling order, NaN where
    missing; last: the same prompts' scores in the last comparable run (NaN where it has
    none), or None for no change questions; round_ends: prompts sampled after each round
    (increasing, the last one = n_prompts). Decisions are read at round ends only: that
    is when the run looks. method: ``betting`` (hedged capital, tighter when differences
    are small against the −100…100 bounds) or ``eb`` (empirical Bernstein). ask: ``all``
    questions, or only the ``pairs`` or only the ``changes`` (these need ``last``).
    horizon, truncation: the bets' tuning (``horizon``: tightest near that many prompts,
    None: the anytime schedule; ``truncation``: the cap c on every bet, < 1), grid: the
    betting form's candidate means (see :mod:`essaybench.stats.confseq_betting`); the
    guarantee holds for every choice made before the run."""
    if ask not in ("all", "pairs", "changes") or (ask == "changes" and last is None):
        raise ValueError(f"ask must be all, pairs or changes (changes need last), got {ask!r}")
    if method not in ("betting", "eb"):
        raise ValueError(f"method must be 'betting' or 'eb', got {method!r}")
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2 or s.shape[1] != len(models):
        raise ValueError(f"scores must be (n_prompts, {len(models)}), got {s.shape}")
    ends = np.asarray(round_ends, dtype=np.int64)
    if ends.size == 0 or (np.diff(ends) <= 0).any() or ends[0] < 1 or ends[-1] != len(s):
        raise ValueError("round_ends must increase from ≥ 1 to the number of prompts")
    qs = questions(models, changes=last is not None and ask != "pairs",
                   pairs_too=ask != "changes")
    col = {m: k for k, m in enumerate(models)}
    first = s[:, [col[q.first] for q in qs]]
    if last is None:
        second = s[:, [col[q.second] for q in qs]]
    else:
        prev = np.asarray(last, dtype=np.float64)
        if prev.shape != s.shape:
            raise ValueError(f"last must have the shape of scores {s.shape}, got {prev.shape}")
        second = np.column_stack([prev[:, col[q.second]] if q.kind is QuestionKind.CHANGE
                                  else s[:, col[q.second]] for q in qs])
    level = alpha / len(qs) if alpha_per == "run" else alpha
    if method == "betting":
        cs = betting_difference_confseq(first, second, alpha=level, horizon=horizon,
                                        truncation=truncation, grid=grid)
    elif horizon is None:
        cs = difference_confseq(first, second, alpha=level, truncation=truncation)
    else:
        raise ValueError("horizon is a setting of the betting sequences (method='betting')")
    diff = first - second
    seen = ~np.isnan(diff)
    with np.errstate(invalid="ignore", divide="ignore"):
        running = np.cumsum(np.where(seen, diff, 0.0), axis=0) / cs.n
    at = ends - 1
    codes = _outcomes(cs.lo[at], cs.hi[at], min_effect)  # (n_rounds, n_questions)
    out = []
    for j, q in enumerate(qs):
        hit = np.flatnonzero(codes[:, j])
        r = int(hit[0]) if hit.size else len(at) - 1
        i = int(at[r])
        out.append(QuestionStatus(
            question=q, outcome=_CODES[int(codes[r, j])],
            decided_round=r + 1 if hit.size else None,
            decided_at_prompts=int(ends[r]) if hit.size else None,
            n_obs=int(cs.n[i, j]), estimate=float(running[i, j]), lo=float(cs.lo[i, j]),
            hi=float(cs.hi[i, j]), alpha=level))
    return tuple(out)
