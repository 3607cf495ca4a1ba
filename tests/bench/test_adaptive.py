"""Adaptive sampling: the config, the seeded prompt order and the decisions after a round.

The decisions are checked against a slow per-question walk through the published
confidence-sequence formula (the scalar reference of tests/stats/test_confseq.py)."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from essaybench.bench.adaptive import AdaptiveOutcome, QuestionKind, decide, questions
from essaybench.bench.adaptive_order import SamplingParams, adaptive_order
from tests.stats.test_confseq import slow_prpl_eb
from tests.stats.test_confseq_betting import slow_hedged

STRATA = {f"p{i:03d}": f"{g}/{s}" for i, (g, s) in enumerate(
    (g, s) for g in ("argumentative", "narrative", "descriptive", "expository")
    for s in ("open", "constrained") for _ in range(10))}


def test_sampling_defaults_to_full_and_is_strict() -> None:
    params = SamplingParams()
    assert params.mode == "full" and params.alpha == 0.05 and params.min_effect == 0.0
    with pytest.raises(ValidationError):
        SamplingParams.model_validate({"mode": "adaptive", "roundsize": 10})
    with pytest.raises(ValidationError):
        SamplingParams(alpha=1.0)
    with pytest.raises(ValidationError):
        SamplingParams(mode="sometimes")  # type: ignore[arg-type]


def test_order_is_seeded_and_ignores_listing_order() -> None:
    params = SamplingParams(mode="adaptive", seed=7, round_size=12)
    one = adaptive_order(STRATA, params)
    two = adaptive_order(dict(reversed(list(STRATA.items()))), params)
    assert one == two
    assert sorted(one.prompt_ids) == sorted(STRATA)
    assert one.strata == tuple(STRATA[p] for p in one.prompt_ids)
    assert one.n_rounds == 7 and len(one.round(6)) == 80 - 6 * 12
    assert sum((one.round(r) for r in range(7)), ()) == one.prompt_ids
    assert adaptive_order(STRATA, params.model_copy(update={"seed": 8})) != one
    with pytest.raises(IndexError):
        one.round(7)
    full = adaptive_order(STRATA, SamplingParams(seed=7))
    assert full.n_rounds == 1 and full.prompt_ids == one.prompt_ids


def test_order_is_uniform_over_positions() -> None:
    """Every prompt is equally likely first (exchangeability the sequences rely on)."""
    firsts = [adaptive_order(STRATA, SamplingParams(seed=s)).prompt_ids[0]
              for s in range(4000)]
    counts = np.array([firsts.count(p) for p in STRATA])
    expected = 4000 / 80
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 130  # 79 d.f.: P(χ² > 130) ≈ 3e-4


def test_floor_per_stratum() -> None:
    order = adaptive_order(STRATA, SamplingParams(mode="adaptive", seed=3, round_size=8))
    r = order.floor_round(3)
    n = order.prompts_after(r)
    for stratum in set(STRATA.values()):
        assert order.strata[:n].count(stratum) >= 3
    assert not order.floor_met(order.prompts_after(r - 1), 3)
    assert order.floor_met(80, 50)  # a floor above a stratum's size asks for all of it
    assert order.floor_met(0, 0)


def test_questions() -> None:
    qs = questions(["a", "b", "c"], changes=True)
    assert [(q.kind, q.first, q.second) for q in qs] == [
        (QuestionKind.PAIR, "a", "b"), (QuestionKind.PAIR, "a", "c"),
        (QuestionKind.PAIR, "b", "c"), (QuestionKind.CHANGE, "a", "a"),
        (QuestionKind.CHANGE, "b", "b"), (QuestionKind.CHANGE, "c", "c")]
    with pytest.raises(ValueError, match="unique"):
        questions(["a", "a"], changes=False)


def _reference(d: np.ndarray, ends: list[int], alpha: float,
               delta: float) -> tuple[str, int | None]:
    """First round end at which the slow CS of d decides, and how."""
    bounds = slow_prpl_eb(((d + 100) / 200).tolist(), alpha)
    for r, end in enumerate(ends):
        lo, hi = (-100 + 200 * b for b in bounds[end - 1])
        if lo > 0:
            return "first_better", r + 1
        if hi < 0:
            return "second_better", r + 1
        if delta > 0 and -delta <= lo and hi <= delta:
            return "within_effect", r + 1
    return "undecided", None


def test_decisions_match_the_slow_reference() -> None:
    rng = np.random.default_rng(11)
    n = 200
    prompt = rng.normal(0, 12, size=(n, 1))
    level = np.array([72.0, 60.0, 71.0, 45.0])
    scores = np.clip(level + prompt + rng.normal(0, 6, size=(n, 4)), 0, 100)
    scores[rng.random(scores.shape) < 0.03] = np.nan
    last = np.clip(level - np.array([8.0, 0.0, 0.0, -10.0]) + prompt
                   + rng.normal(0, 6, size=(n, 4)), 0, 100)
    ends = list(range(20, n + 1, 20))
    models = ["m0", "m1", "m2", "m3"]
    got = decide(scores, models, round_ends=ends, alpha=0.05, min_effect=4.0, last=last,
                 method="eb")
    assert len(got) == 6 + 4
    col = {m: k for k, m in enumerate(models)}
    for st in got:
        q = st.question
        other = last[:, col[q.second]] if q.kind is QuestionKind.CHANGE \
            else scores[:, col[q.second]]
        outcome, round_no = _reference(scores[:, col[q.first]] - other, ends, 0.05, 4.0)
        assert (st.outcome.value, st.decided_round) == (outcome, round_no), q
        if round_no is not None:
            assert st.decided_at_prompts == ends[round_no - 1]
    by = {(s.question.kind, s.question.first, s.question.second): s for s in got}
    assert by[QuestionKind.PAIR, "m0", "m3"].label == "m0 better"
    assert by[QuestionKind.PAIR, "m1", "m2"].label == "m2 better"
    assert by[QuestionKind.CHANGE, "m0", "m0"].label == "changed up"
    assert by[QuestionKind.CHANGE, "m3", "m3"].label == "changed down"
    assert by[QuestionKind.CHANGE, "m1", "m1"].outcome in (AdaptiveOutcome.WITHIN_EFFECT,
                                                          AdaptiveOutcome.UNDECIDED)
    assert by[QuestionKind.PAIR, "m0", "m3"].decided_at_prompts == 60  # 27 points apart
    betting = decide(scores, models, round_ends=ends, alpha=0.05, min_effect=4.0, last=last)
    assert betting[2].decided_at_prompts == 40  # m0 − m3: sooner than with EB (60)
    assert all(b.outcome in (e.outcome, AdaptiveOutcome.UNDECIDED) or not e.decided
               for b, e in zip(betting, got, strict=True))


def test_without_min_effect_equal_models_stay_undecided() -> None:
    rng = np.random.default_rng(12)
    base = rng.uniform(40, 90, size=(300, 1))
    scores = np.clip(base + rng.normal(0, 3, size=(300, 2)), 0, 100)
    got = decide(scores, ["a", "b"], round_ends=[100, 200, 300], alpha=0.05)
    assert got[0].outcome is AdaptiveOutcome.UNDECIDED and got[0].decided_round is None
    assert got[0].n_obs == 300 and got[0].lo < got[0].estimate < got[0].hi
    eq = decide(scores, ["a", "b"], round_ends=[100, 200, 300], alpha=0.05, min_effect=5.0)
    assert eq[0].label == "equivalent"
    with pytest.raises(ValueError, match="method"):
        decide(scores, ["a", "b"], round_ends=[300], alpha=0.05, method="bayes")


def test_ask_only_pairs_or_only_changes() -> None:
    scores = np.tile(np.array([[70.0, 60.0, 50.0]]), (30, 1)) + np.arange(30)[:, None] % 7
    kinds = {ask: [s.question.kind for s in decide(scores, ["a", "b", "c"], round_ends=[30],
                                                   alpha=0.05, last=scores - 5, ask=ask)]
             for ask in ("all", "pairs", "changes")}
    assert kinds["all"] == [QuestionKind.PAIR] * 3 + [QuestionKind.CHANGE] * 3
    assert kinds["pairs"] == [QuestionKind.PAIR] * 3
    assert kinds["changes"] == [QuestionKind.CHANGE] * 3
    with pytest.raises(ValueError, match="changes need last"):
        decide(scores, ["a", "b", "c"], round_ends=[30], alpha=0.05, ask="changes")


def test_alpha_per_run_splits_alpha() -> None:
    scores = np.tile(np.array([[70.0, 60.0, 50.0]]), (30, 1)) + np.arange(30)[:, None] % 7
    per_q = decide(scores, ["a", "b", "c"], round_ends=[30], alpha=0.06)
    per_run = decide(scores, ["a", "b", "c"], round_ends=[30], alpha=0.06, alpha_per="run")
    assert [s.alpha for s in per_run] == pytest.approx([0.02] * 3)
    assert all(r.hi - r.lo > q.hi - q.lo for r, q in zip(per_run, per_q, strict=True))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"round_ends": [5, 5, 10]}, "round_ends"),
    ({"round_ends": [9]}, "round_ends"),
    ({"round_ends": [10], "last": np.zeros((9, 2))}, "last"),
])
def test_decide_rejects_bad_shapes(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decide(np.full((10, 2), 50.0), ["a", "b"], alpha=0.05, **kwargs)  # type: ignore[arg-type]


def test_tuned_bets_reach_decide_and_match_the_slow_walk() -> None:
    """decide(horizon=…, truncation=…) reads the tuned betting sequence: each question's
    first decision equals the one a scalar hedged-capital walk with those bets gives
    (tests/stats/test_confseq_betting.py's reference), and it comes no later than with the
    anytime bets on these 15-point differences."""
    rng = np.random.default_rng(13)
    n = 120
    prompt = rng.normal(0, 12, size=(n, 1))
    scores = np.clip(np.array([70.0, 55.0, 69.0]) + prompt + rng.normal(0, 6, size=(n, 3)),
                     0, 100)
    scores[rng.random(scores.shape) < 0.03] = np.nan
    ends = list(range(20, n + 1, 20))
    got = decide(scores, ["a", "b", "c"], round_ends=ends, alpha=0.05, min_effect=5.0,
                 horizon=60, truncation=0.9, grid=201)
    pairs = [(0, 1), (0, 2), (1, 2)]
    for st, (i, j) in zip(got, pairs, strict=True):
        d = scores[:, i] - scores[:, j]
        bounds = slow_hedged(((d + 100) / 200).tolist(), 0.05, 201, c=0.9, horizon=60)
        want: tuple[str, int | None] = ("undecided", None)
        for r, end in enumerate(ends):
            lo, hi = (-100 + 200 * b for b in bounds[end - 1])
            code = ("first_better" if lo > 0 else "second_better" if hi < 0 else
                    "within_effect" if lo >= -5 and hi <= 5 else None)
            if code:
                want = (code, r + 1)
                break
        assert (st.outcome.value, st.decided_round) == want
    anytime = decide(scores, ["a", "b", "c"], round_ends=ends, alpha=0.05, min_effect=5.0,
                     grid=201)
    assert got[0].decided_round is not None and anytime[0].decided_round is not None
    assert got[0].decided_round <= anytime[0].decided_round
    with pytest.raises(ValueError, match="horizon"):
        decide(scores, ["a", "b", "c"], round_ends=[n], alpha=0.05, method="eb", horizon=60)


def test_sampling_params_tuning_fields() -> None:
    params = SamplingParams()
    assert params.horizon is None and params.truncation == 0.5  # the anytime defaults
    assert params.grid == 401 and not params.stop_per_model
    assert SamplingParams(horizon=364, truncation=0.9).horizon == 364
    for bad in ({"horizon": 0}, {"truncation": 1.0}, {"truncation": 0.0}, {"grid": 2}):
        with pytest.raises(ValidationError):
            SamplingParams.model_validate(bad)
