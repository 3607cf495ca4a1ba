"""Adaptive sampling's loop: ask for a round of prompts, decide, stop or go on; and the
record of what was decided when (issue 26 item 3).

The run stops when every question is decided and every stratum has its floor
(``all_decided``), when ``max_prompts`` prompts were asked for (``max_prompts``), when the
next prompt would exceed the budget of paid calls (``budget``), or when the prompt set is
exhausted (``exhausted``). The loop is synchronous and pure: the caller's ``score_round``
generates and judges the round's prompts (writers are never called for prompts that are
not sampled) and returns per-prompt scores; how it pays (batch, direct) is its business.

With ``stop_per_model`` a model whose asked questions are all decided (once the floor
holds) is no longer scored: the caller's ``score_models(ids, models)`` generates and
judges only those models and returns NaN for the others, and the round costs
``calls_per_prompt / len(models)`` calls per prompt and scored model. Each question's
sequence simply stops with its models (a stopping time like any other), so every
decision keeps its guarantee; a stopped model's questions are all decided already.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import polars as pl

from essaybench.bench.adaptive import FloatArray, QuestionStatus, decide
from essaybench.bench.adaptive_order import AdaptiveOrder, SamplingParams

__all__ = ["AdaptiveRecord", "ModelRoundScorer", "RoundRecord", "RoundScorer", "StopReason",
           "models_needed", "run_adaptive", "stop_reason"]

# Scores of a round's prompts, (n_round, n_models), and the same prompts' scores in the
# last comparable run (or None: no change questions). NaN where a score is missing.
RoundScorer = Callable[[tuple[str, ...]], tuple[FloatArray, FloatArray | None]]
# The same for the named models only (prompt ids, models to score): full-width arrays in
# the run's model order, NaN in the columns of models not asked for.
ModelRoundScorer = Callable[[tuple[str, ...], tuple[str, ...]],
                            tuple[FloatArray, FloatArray | None]]


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
    scored: tuple[str, ...] = ()  # models scored this round (stop_per_model), () = all


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


def models_needed(statuses: Sequence[QuestionStatus], models: Sequence[str], *,
                  floor_met: bool) -> tuple[str, ...]:
    """The models still to score (stop_per_model): all before the first round or the
    floor, then those with an undecided question (in the run's model order)."""
    if not statuses or not floor_met:
        return tuple(models)
    open_ = {m for s in statuses if not s.decided
             for m in (s.question.first, s.question.second)}
    return tuple(m for m in models if m in open_)


def _next_size(order: AdaptiveOrder, params: SamplingParams, n_prompts: int, calls: int,
               calls_per_prompt: int) -> int:
    size = min(order.round_size, len(order.prompt_ids) - n_prompts)
    if params.mode == "adaptive" and params.max_prompts is not None:
        size = min(size, params.max_prompts - n_prompts)
    if params.mode == "adaptive" and params.max_calls is not None:
        size = min(size, (params.max_calls - calls) // calls_per_prompt)
    return size


def run_adaptive(order: AdaptiveOrder, params: SamplingParams, models: Sequence[str],
                 score_round: RoundScorer, *, calls_per_prompt: int,
                 score_models: ModelRoundScorer | None = None) -> AdaptiveRecord:
    """Ask for rounds of prompts until :func:`stop_reason` says stop; decide after each.
    ``calls_per_prompt``: paid calls one sampled prompt costs (writers + judges).
    ``score_models``: the scorer of named models, used instead of ``score_round`` when
    ``params.stop_per_model`` (then ``calls_per_prompt`` must be a multiple of the number
    of models)."""
    if calls_per_prompt < 1:
        raise ValueError("calls_per_prompt must be ≥ 1")
    per_model = params.mode == "adaptive" and params.stop_per_model
    if per_model and (score_models is None or calls_per_prompt % len(models)):
        raise ValueError("stop_per_model needs score_models and calls_per_prompt a multiple "
                         "of the number of models")
    blocks: list[FloatArray] = []
    last_blocks: list[FloatArray] = []
    ends: list[int] = []
    rounds: list[RoundRecord] = []
    statuses: tuple[QuestionStatus, ...] = ()
    n = calls = 0
    active = tuple(models)
    cost = calls_per_prompt  # calls one prompt costs now
    while (reason := stop_reason(statuses, order, params, n_prompts=n, calls=calls,
                                 calls_per_prompt=cost)) is None:
        ids = order.prompt_ids[n:n + _next_size(order, params, n, calls, cost)]
        if per_model and score_models is not None:
            scores, last = score_models(ids, active)
        else:
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
        calls += len(ids) * cost
        ends.append(n)
        statuses = decide(np.vstack(blocks), models, round_ends=ends, alpha=params.alpha,
                          min_effect=params.min_effect, alpha_per=params.alpha_per,
                          method=params.method, ask=params.ask, horizon=params.horizon,
                          truncation=params.truncation, grid=params.grid,
                          last=np.vstack(last_blocks) if last_blocks else None)
        rounds.append(RoundRecord(index=len(ends), n_prompts=n, calls=calls,
                                  decided=sum(s.decided for s in statuses),
                                  scored=active if per_model else ()))
        if per_model:
            active = models_needed(statuses, models, floor_met=order.floor_met(
                n, params.floor_per_stratum))
            cost = len(active) * (calls_per_prompt // len(models))
    return AdaptiveRecord(params=params, statuses=statuses, rounds=tuple(rounds),
                          stop=reason, sampled=order.prompt_ids[:n])
