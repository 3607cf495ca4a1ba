"""Adaptive sampling's loop: ask for a round of prompts, decide, stop or go on; and the
record of what was decided when (issue 26 item 3).

The run stops when every question is decided and every stratum has its floor
(``all_decided``), when ``max_prompts`` prompts were asked for (``max_prompts``), when the
next prompt would exceed the budget of paid calls (``budget``), or when the prompt set is
exhausted (``exhausted``). The loop is synchronous and pure: the caller's ``score_round``
generates and judges the round's prompts (writers are never called for prompts that are
not sampled) and returns per-prompt scores; how it pays (batch, direct) is its business.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import polars as pl

from essaybench.bench.adaptive import FloatArray, QuestionStatus, decide
from essaybench.bench.adaptive_order import AdaptiveOrder, SamplingParams

__all__ = ["AdaptiveRecord", "RoundRecord", "RoundScorer", "StopReason", "run_adaptive",
           "stop_reason"]

# Scores of a round's prompts, (n_round, n_models), and the same prompts' scores in the
# last comparable run (or None: no change questions). NaN where a score is missing.
RoundScorer = Callable[[tuple[str, ...]], tuple[FloatArray, FloatArray | None]]


class StopReason(StrEnum):
    ALL_DECIDED = "all_decided"
    MAX_PROMPTS = "max_prompts"
    BUDGET = "budget"
    EXHAUSTED = "exhausted"


@dataclass(frozen=True)
class RoundRecord:
    index: int  # 1-based
    n_prompts: int  # sampled after this round
    calls: int  # paid after this round
    decided: int  # questions decided after this round


@dataclass(frozen=True)
class AdaptiveRecord:
    """What an adaptive run did: its questions' statuses, its rounds, why it stopped and
    which prompts it sampled (in order)."""

    params: SamplingParams
    statuses: tuple[QuestionStatus, ...]
    rounds: tuple[RoundRecord, ...]
    stop: StopReason
    sampled: tuple[str, ...]

    @property
    def undecided(self) -> tuple[QuestionStatus, ...]:
        return tuple(s for s in self.statuses if not s.decided)

    @property
    def calls(self) -> int:
        return self.rounds[-1].calls if self.rounds else 0

    def to_frame(self) -> pl.DataFrame:
        """One row per question: kind, first, second, outcome, label, decided round and
        sample size (null when undecided), observations, estimate and bounds, alpha."""
        return pl.DataFrame([{
            "kind": s.question.kind.value, "first": s.question.first,
            "second": s.question.second, "outcome": s.outcome.value, "label": s.label,
            "decided_round": s.decided_round, "decided_at_prompts": s.decided_at_prompts,
            "n_obs": s.n_obs, "estimate": s.estimate, "lo": s.lo, "hi": s.hi,
            "alpha": s.alpha} for s in self.statuses],
            schema_overrides={"decided_round": pl.Int64, "decided_at_prompts": pl.Int64})


def stop_reason(statuses: Sequence[QuestionStatus], order: AdaptiveOrder,
                params: SamplingParams, *, n_prompts: int, calls: int,
                calls_per_prompt: int) -> StopReason | None:
    """Why the run stops after ``n_prompts`` prompts and ``calls`` paid calls (None: go
    on). A full-mode run never stops before the prompt set is exhausted."""
    total = len(order.prompt_ids)
    if n_prompts >= total:
        return StopReason.EXHAUSTED
    if params.mode == "full":
        return None
    if (statuses and all(s.decided for s in statuses)
            and order.floor_met(n_prompts, params.floor_per_stratum)):
        return StopReason.ALL_DECIDED
    if params.max_prompts is not None and n_prompts >= params.max_prompts:
        return StopReason.MAX_PROMPTS
    if params.max_calls is not None and calls + calls_per_prompt > params.max_calls:
        return StopReason.BUDGET
    return None


def _next_size(order: AdaptiveOrder, params: SamplingParams, n_prompts: int, calls: int,
               calls_per_prompt: int) -> int:
    size = min(order.round_size, len(order.prompt_ids) - n_prompts)
    if params.mode == "adaptive" and params.max_prompts is not None:
        size = min(size, params.max_prompts - n_prompts)
    if params.mode == "adaptive" and params.max_calls is not None:
        size = min(size, (params.max_calls - calls) // calls_per_prompt)
    return size


def run_adaptive(order: AdaptiveOrder, params: SamplingParams, models: Sequence[str],
                 score_round: RoundScorer, *, calls_per_prompt: int) -> AdaptiveRecord:
    """Ask for rounds of prompts until :func:`stop_reason` says stop; decide after each.
    ``calls_per_prompt``: paid calls one sampled prompt costs (writers + judges)."""
    if calls_per_prompt < 1:
        raise ValueError("calls_per_prompt must be ≥ 1")
    blocks: list[FloatArray] = []
    last_blocks: list[FloatArray] = []
    ends: list[int] = []
    rounds: list[RoundRecord] = []
    statuses: tuple[QuestionStatus, ...] = ()
    n = calls = 0
    while (reason := stop_reason(statuses, order, params, n_prompts=n, calls=calls,
                                 calls_per_prompt=calls_per_prompt)) is None:
        ids = order.prompt_ids[n:n + _next_size(order, params, n, calls, calls_per_prompt)]
        scores, last = score_round(ids)
        if np.shape(scores) != (len(ids), len(models)):
            raise ValueError(f"score_round returned {np.shape(scores)} for {len(ids)} "
                             f"prompts × {len(models)} models")
        if blocks and (last is None) != (not last_blocks):
            raise ValueError("score_round must return last-run scores every round or never")
        blocks.append(np.asarray(scores, dtype=np.float64))
        if last is not None:
            last_blocks.append(np.asarray(last, dtype=np.float64))
        n += len(ids)
        calls += len(ids) * calls_per_prompt
        ends.append(n)
        statuses = decide(np.vstack(blocks), models, round_ends=ends, alpha=params.alpha,
                          min_effect=params.min_effect, alpha_per=params.alpha_per,
                          method=params.method, ask=params.ask,
                          last=np.vstack(last_blocks) if last_blocks else None)
        rounds.append(RoundRecord(index=len(ends), n_prompts=n, calls=calls,
                                  decided=sum(s.decided for s in statuses)))
    return AdaptiveRecord(params=params, statuses=statuses, rounds=tuple(rounds),
                          stop=reason, sampled=order.prompt_ids[:n])
