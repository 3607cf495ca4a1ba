"""Adaptive sampling's loop: the stopping rule (all decided + floor, max prompts, budget,
exhausted), that unsampled prompts are never scored, the record, and wrong "separated"
claims under optional stopping."""

from __future__ import annotations

import numpy as np
import pytest

from essaybench.bench.adaptive import FloatArray, QuestionKind, decide
from essaybench.bench.adaptive_order import SamplingParams, adaptive_order
from essaybench.bench.adaptive_run import StopReason, run_adaptive

STRATA = {f"p{i:03d}": ("argumentative/open", "narrative/open", "expository/constrained",
                        "descriptive/constrained")[i % 4] for i in range(400)}
MODELS = ("strong", "middle", "weak")


class World:
    """Per-prompt scores of three models far apart, fixed per prompt; counts what it
    is asked to score."""

    def __init__(self, levels: tuple[float, ...] = (85.0, 65.0, 45.0), seed: int = 0,
                 change: tuple[float, ...] | None = None) -> None:
        rng = np.random.default_rng(seed)
        ids = sorted(STRATA)
        prompt = rng.normal(0, 8, size=(len(ids), 1))
        self.scores = dict(zip(ids, np.clip(np.array(levels) + prompt + rng.normal(
            0, 4, size=(len(ids), len(levels))), 0, 100), strict=True))
        self.last = None if change is None else {
            p: np.clip(s - np.array(change) + rng.normal(0, 4, size=len(levels)), 0, 100)
            for p, s in self.scores.items()}
        self.asked: list[str] = []

    def __call__(self, ids: tuple[str, ...]) -> tuple[FloatArray, FloatArray | None]:
        self.asked.extend(ids)
        now = np.array([self.scores[p] for p in ids])
        return now, None if self.last is None else np.array([self.last[p] for p in ids])


def test_stops_when_all_decided_and_floor_met() -> None:
    params = SamplingParams(mode="adaptive", seed=1, round_size=10, floor_per_stratum=12)
    order = adaptive_order(STRATA, params)
    world = World()
    rec = run_adaptive(order, params, MODELS, world, calls_per_prompt=6)
    assert rec.stop is StopReason.ALL_DECIDED and not rec.undecided
    assert world.asked == list(rec.sampled) == list(order.prompt_ids[:len(rec.sampled)])
    assert len(rec.sampled) == order.prompts_after(order.floor_round(12))  # the floor held
    assert rec.calls == 6 * len(rec.sampled)
    assert [r.n_prompts for r in rec.rounds] == list(range(10, len(rec.sampled) + 1, 10))
    frame = rec.to_frame()
    assert frame["label"].to_list() == ["strong better", "strong better", "middle better"]
    assert max(frame["decided_at_prompts"].to_list()) <= len(rec.sampled)


def test_change_questions_and_undecided_until_max_prompts() -> None:
    params = SamplingParams(mode="adaptive", seed=2, round_size=25, max_prompts=120,
                            floor_per_stratum=0)
    world = World(levels=(70.0, 70.0, 40.0), change=(0.0, 15.0, -15.0))
    rec = run_adaptive(adaptive_order(STRATA, params), params, MODELS, world,
                       calls_per_prompt=4)
    assert rec.stop is StopReason.MAX_PROMPTS and len(world.asked) == 120
    by = {(s.question.kind, s.question.first, s.question.second): s for s in rec.statuses}
    assert by[QuestionKind.PAIR, "strong", "middle"].label == "undecided"  # equal means
    assert by[QuestionKind.CHANGE, "middle", "middle"].label == "changed up"
    assert by[QuestionKind.CHANGE, "weak", "weak"].label == "changed down"
    assert by[QuestionKind.CHANGE, "strong", "strong"].label == "undecided"
    with_effect = params.model_copy(update={"min_effect": 6.0, "max_prompts": None})
    rec2 = run_adaptive(adaptive_order(STRATA, with_effect), with_effect, MODELS,
                        World(levels=(70.0, 70.0, 40.0), change=(0.0, 15.0, -15.0)),
                        calls_per_prompt=4)
    labels = {(s.question.kind, s.question.first, s.question.second): s.label
              for s in rec2.statuses}
    assert labels[QuestionKind.CHANGE, "strong", "strong"] == "no change"
    assert labels[QuestionKind.PAIR, "strong", "middle"] == "equivalent"
    assert rec2.stop is StopReason.ALL_DECIDED and len(rec2.sampled) < 400


def test_budget_and_exhaustion_and_full_mode() -> None:
    budget = SamplingParams(mode="adaptive", seed=3, round_size=20, max_calls=250)
    world = World(levels=(70.0, 70.0, 70.0))
    rec = run_adaptive(adaptive_order(STRATA, budget), budget, MODELS, world,
                       calls_per_prompt=6)
    assert rec.stop is StopReason.BUDGET and rec.calls == 246 and len(world.asked) == 41
    assert rec.rounds[-1].n_prompts - rec.rounds[-2].n_prompts == 1  # cut to fit
    endless = SamplingParams(mode="adaptive", seed=3, round_size=64)
    rec = run_adaptive(adaptive_order(STRATA, endless), endless, MODELS,
                       World(levels=(70.0, 70.0, 70.0)), calls_per_prompt=1)
    assert rec.stop is StopReason.EXHAUSTED and len(rec.sampled) == 400
    full = SamplingParams(max_prompts=10)  # mode full: limits are adaptive-only
    world = World()
    rec = run_adaptive(adaptive_order(STRATA, full), full, MODELS, world, calls_per_prompt=1)
    assert rec.stop is StopReason.EXHAUSTED and len(rec.rounds) == 1 and len(world.asked) == 400


def test_rejects_a_scorer_that_breaks_its_contract() -> None:
    params = SamplingParams(mode="adaptive", round_size=5)
    order = adaptive_order(STRATA, params)
    with pytest.raises(ValueError, match="returned"):
        run_adaptive(order, params, MODELS, lambda ids: (np.zeros((len(ids), 2)), None),
                     calls_per_prompt=1)
    flip = iter([True, False])

    def sometimes(ids: tuple[str, ...]) -> tuple[FloatArray, FloatArray | None]:
        s = np.full((len(ids), 3), 50.0) + np.arange(len(ids), dtype=np.float64)[:, None]
        return s, (s if next(flip) else None)

    with pytest.raises(ValueError, match="every round or never"):
        run_adaptive(order, params, MODELS, sometimes, calls_per_prompt=1)
    with pytest.raises(ValueError, match="calls_per_prompt"):
        run_adaptive(order, params, MODELS, World(), calls_per_prompt=0)


def test_wrong_separated_claims_under_optional_stopping() -> None:
    """Equal true means, prompts in random order, a look after every round of 20 until
    decided or 200 prompts: a pair is claimed separated in ≤ 5% of runs (per question).
    Independent worlds, each drawn fresh (scores differ by noise only)."""
    params = SamplingParams(mode="adaptive", round_size=20, max_prompts=200,
                            floor_per_stratum=0)
    wrong = 0
    runs = 100
    for seed in range(runs):
        world = World(levels=(60.0, 60.0, 60.0), seed=1000 + seed)
        rec = run_adaptive(adaptive_order(STRATA, params.model_copy(update={"seed": seed})),
                           params, MODELS, world, calls_per_prompt=1)
        wrong += sum(s.decided for s in rec.statuses)
    assert wrong / (3 * runs) <= 0.05


def test_loop_passes_the_tuning_to_decide() -> None:
    """horizon, truncation and grid in SamplingParams reach the decisions: the record's
    statuses are decide()'s on the sampled prompts with the same settings."""
    params = SamplingParams(mode="adaptive", seed=4, round_size=20, floor_per_stratum=0,
                            max_prompts=60, horizon=40, truncation=0.9, grid=201)
    world = World(levels=(70.0, 68.0, 66.0), change=(0.0, 0.0, 3.0))
    rec = run_adaptive(adaptive_order(STRATA, params), params, MODELS, world,
                       calls_per_prompt=1)
    now = np.array([world.scores[p] for p in rec.sampled])
    assert world.last is not None
    before = np.array([world.last[p] for p in rec.sampled])
    ends = [r.n_prompts for r in rec.rounds]
    tuned = decide(now, MODELS, round_ends=ends, alpha=0.05, last=before, horizon=40,
                   truncation=0.9, grid=201)
    anytime = decide(now, MODELS, round_ends=ends, alpha=0.05, last=before)
    assert rec.statuses == tuned
    assert [s.hi - s.lo for s in tuned] != [s.hi - s.lo for s in anytime]


class ModelWorld(World):
    """World that scores only the models it is asked for (NaN for the others) and counts
    the (prompt, model) cells it scored."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.cells: dict[str, int] = dict.fromkeys(MODELS, 0)

    def some(self, ids: tuple[str, ...], wanted: tuple[str, ...]
             ) -> tuple[FloatArray, FloatArray | None]:
        now, before = self(ids)
        off = [k for k, m in enumerate(MODELS) if m not in wanted]
        now[:, off] = np.nan
        if before is not None:
            before[:, off] = np.nan
        for m in wanted:
            self.cells[m] += len(ids)
        return now, before


def test_stop_per_model_stops_each_model_at_its_last_decision() -> None:
    """Per-model stopping makes the same decisions as the ordinary loop on the same world
    (each question's sequence is the same until it decides), and each model is scored
    exactly up to the round its last question was decided (or the floor): from the
    ordinary run's decided_at_prompts, independently of the per-model bookkeeping."""
    params = SamplingParams(mode="adaptive", seed=5, round_size=10, floor_per_stratum=3,
                            min_effect=6.0, ask="changes")
    world_args = {"levels": (70.0, 60.0, 50.0), "change": (0.0, 15.0, -9.0), "seed": 7}
    order = adaptive_order(STRATA, params)
    plain = run_adaptive(order, params, MODELS, World(**world_args),  # type: ignore[arg-type]
                         calls_per_prompt=6)
    world = ModelWorld(**world_args)
    rec = run_adaptive(order, params.model_copy(update={"stop_per_model": True}), MODELS,
                       world, calls_per_prompt=6, score_models=world.some)
    assert [s.outcome for s in rec.statuses] == [s.outcome for s in plain.statuses]
    assert [s.decided_at_prompts for s in rec.statuses] == [
        s.decided_at_prompts for s in plain.statuses]
    floor_n = order.prompts_after(order.floor_round(3))
    want = {s.question.first: max(s.decided_at_prompts or 400, floor_n)
            for s in plain.statuses}
    assert world.cells == want
    assert len(set(want.values())) > 1  # the models did stop at different rounds
    assert rec.calls == 2 * sum(want.values()) < plain.calls
    assert rec.rounds[0].scored == MODELS and len(rec.rounds[-1].scored) < 3
    with pytest.raises(ValueError, match="score_models"):
        run_adaptive(order, params.model_copy(update={"stop_per_model": True}), MODELS,
                     world, calls_per_prompt=6)
