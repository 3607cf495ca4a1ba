"""Adaptive sampling's settings and its prompt order: which prompts a run asks for, in
which rounds (issue 26 item 3).

The order is a seeded, uniformly random permutation of the prompt set, cut into rounds of
``round_size``. Why not a stratum-balanced order (each round a proportional share of
every genre × Open/Constrained cell): the confidence sequences that make early stopping
safe (:mod:`essaybench.stats.confseq`) need every next prompt to be an exchangeable draw;
an order that interleaves strata by design makes the next prompt's expected score depend
on which stratum is due, and the guarantee is gone. Stratification enters instead as a
stopping constraint: the run does not stop before every stratum has ``floor_per_stratum``
prompts (or all of its prompts) — a stopping time like any other, which the sequences
allow. :meth:`AdaptiveOrder.floor_round` says when that first holds.

Same seed, same prompt set → same order, whatever order the prompts are listed in: give
comparable runs the same seed and this week's prefix is last week's, so each model's
change can be paired on the same prompts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from essaybench.stats.confseq_betting import DEFAULT_GRID

__all__ = ["AdaptiveOrder", "SamplingParams", "adaptive_order"]


class SamplingParams(BaseModel):
    """``sampling:`` in the benchmark config. ``full`` (the default) asks for every prompt
    in one round; ``adaptive`` asks round by round and stops once every question is
    decided (see :mod:`essaybench.bench.adaptive`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["full", "adaptive"] = Field(
        default="full", description="full: every prompt; adaptive: rounds, early stop.")
    seed: int = Field(default=0, description="Seed of the prompt order (keep it across "
                      "comparable runs: the same prefix is then paired week to week).")
    round_size: int = Field(default=40, ge=1, description="Prompts per round.")
    floor_per_stratum: int = Field(
        default=5, ge=0, description="No stop before each genre × Open/Constrained cell "
        "has this many prompts (or all it has).")
    max_prompts: int | None = Field(default=None, ge=1,
                                    description="Stop after this many prompts (None: all).")
    max_calls: int | None = Field(default=None, ge=1, description="Budget in paid calls: "
                                  "no round starts that would exceed it (None: no cap).")
    alpha: float = Field(default=0.05, gt=0.0, lt=1.0, description="Error rate of each "
                         "decision, valid under optional stopping.")
    alpha_per: Literal["question", "run"] = Field(
        default="question", description="question: alpha for each decision; run: alpha "
        "split evenly over the run's questions (Bonferroni: P(any wrong) ≤ alpha).")
    ask: Literal["all", "pairs", "changes"] = Field(
        default="all", description="Which questions the run decides (and waits for): every "
        "pairwise difference and every model's change, only the pairs, or only the changes.")
    method: Literal["betting", "eb"] = Field(
        default="betting", description="Confidence sequence: betting (hedged capital) or "
        "eb (empirical Bernstein, looser for small differences).")
    min_effect: float = Field(
        default=0.0, ge=0.0, le=100.0, description="Smallest difference of interest in "
        "points (0–100): a sequence inside ±min_effect decides 'no change' / 'equivalent' "
        "(0: such questions stay undecided).")
    horizon: int | None = Field(
        default=None, ge=1, description="Betting sequences tuned to decide near this many "
        "prompts (e.g. half the prompt set): tighter there, looser far from it (None: the "
        "anytime schedule). Valid either way; fix it before the run.")
    grid: int = Field(
        default=DEFAULT_GRID, ge=3, le=4001, description="Candidate means of the betting sequences "
        "on −100…100 (401: a step of 0.5 points; 801: 0.25, twice the CPU).")
    stop_per_model: bool = Field(
        default=False, description="Each model's writer and judges stop once every asked "
        "question involving it is decided and the floor holds (fewer calls when one hard "
        "question would keep every model going); needs a scorer told which models to "
        "score (run_adaptive's score_models).")
    truncation: float = Field(
        default=0.5, gt=0.0, lt=1.0, description="Cap c on each bet (fraction of the "
        "largest bet that keeps the wealth positive): larger bets, narrower sequences when "
        "differences are small against the −100…100 bounds.")


@dataclass(frozen=True)
class AdaptiveOrder:
    """The prompts in the order they are asked for, cut into rounds, with their
    strata (e.g. ``argumentative/open``)."""

    prompt_ids: tuple[str, ...]
    strata: tuple[str, ...]  # stratum of each prompt, aligned with prompt_ids
    round_size: int

    @property
    def n_rounds(self) -> int:
        return -(-len(self.prompt_ids) // self.round_size)

    def round(self, index: int) -> tuple[str, ...]:
        """The prompts of round ``index`` (0-based)."""
        if not 0 <= index < self.n_rounds:
            raise IndexError(f"round {index} of {self.n_rounds}")
        return self.prompt_ids[index * self.round_size:(index + 1) * self.round_size]

    def prompts_after(self, rounds: int) -> int:
        """How many prompts the first ``rounds`` rounds hold."""
        return min(rounds * self.round_size, len(self.prompt_ids))

    def floor_met(self, n_prompts: int, floor: int) -> bool:
        """Whether the first ``n_prompts`` hold ``floor`` prompts of every stratum (or all
        of a smaller stratum)."""
        have = Counter(self.strata[:n_prompts])
        sizes = Counter(self.strata)
        return all(have[s] >= min(floor, size) for s, size in sizes.items())

    def floor_round(self, floor: int) -> int:
        """The first round after which :meth:`floor_met` holds (1-based count)."""
        return next(r for r in range(self.n_rounds + 1)
                    if self.floor_met(self.prompts_after(r), floor))


def adaptive_order(strata: Mapping[str, str], params: SamplingParams) -> AdaptiveOrder:
    """The seeded order of the prompts ``strata`` maps (prompt id → stratum). In ``full``
    mode one round holds every prompt (same order)."""
    if not strata:
        raise ValueError("no prompts to order")
    ids = sorted(strata)  # the order must not depend on how the caller listed them
    perm = np.random.default_rng(params.seed).permutation(len(ids))
    ordered = tuple(ids[i] for i in perm)
    size = params.round_size if params.mode == "adaptive" else len(ordered)
    return AdaptiveOrder(prompt_ids=ordered, strata=tuple(strata[p] for p in ordered),
                         round_size=size)
