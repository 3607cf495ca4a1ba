"""The run estimate: calls, tokens, USD and wall time checked against hand arithmetic, and
ledger statistics (a real ledger file) preferred over assumptions. The models here are of
the fake server's tokenizer family: 1.6 Chinese characters or 4 others per token, 4 tokens
per message and 3 per request (configs/token_ratios.yaml, llm/fake/protocol.py)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from essaybench.bench.anchors import load_anchor_set, sample_anchors
from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.drift import DriftParams
from essaybench.bench.estimate import estimate_benchmark
from essaybench.bench.estimate_records import EstimateError, TokenStats
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.bench.pairwise.design import PairwiseParams
from essaybench.bench.pairwise.prompt import render_pairwise_messages
from essaybench.bench.rubrics import (
    load_judge_prompt,
    load_rubric,
    render_judge_messages,
    rubrics_dir,
)
from essaybench.llm.ledger import Ledger, ledger_row
from essaybench.llm.registry import ModelSpec, Registry
from essaybench.llm.types import CallStatus, ChatResult, Usage
from essaybench.runs.estimate import read_token_stats

P0 = "写一篇不少于500字的议论文，谈谈诚信。"  # asks for at least 500 characters
P1 = "以“门”为题写一篇记叙文。"  # asks for no length
PROMPTS = pl.DataFrame({"prompt_id": ["p0", "p1"], "genre": ["argumentative", "narrative"],
                        "prompt_set": ["constrained", "open"], "text": [P0, P1]})


def spec(name: str, **fields: Any) -> ModelSpec:
    base: dict[str, Any] = {"name": name, "provider": "test", "base_url": "http://x.invalid/v1",
                            "model_id": name, "family": "fake"}
    return ModelSpec(**{**base, **fields})


# w: priced, 2 in flight, 3 requests a minute; e: the embedded model (no price, free);
# j: judges, 4 in flight, 6000 tokens a minute.
REGISTRY = Registry(models={s.name: s for s in (
    spec("w", price_input_per_mtok=2.0, price_output_per_mtok=8.0, max_concurrency=2, rpm=3,
         default_params={"max_tokens": 1000}),
    spec("e", base_url="embedded", max_concurrency=1, default_params={"max_tokens": 400}),
    spec("j", price_input_per_mtok=1.0, price_output_per_mtok=4.0, max_concurrency=4,
         tpm=6000),
)})
V2 = load_judge_prompt(rubrics_dir() / "judge_prompt.v2.yaml")  # the default judge prompt
CONFIG = BenchmarkConfig(
    generate=GenerateParams(models=("w", "e"), samples=2),
    judge=JudgeParams(judges=["j"], max_tokens=500),
    pairwise=PairwiseParams(judges=["j"], max_tokens=300), drift=None)


def chars(messages: list[dict[str, str]]) -> int:
    return sum(len(m["content"]) for m in messages)


def fake_tokens(text: str) -> float:
    """The fake tokenizer's count, by hand: CJK ideographs and full-width punctuation at
    1.6 characters per token, anything else at 4 (not rounded up per text)."""
    cjk = sum(1 for c in text if "\u4e00" <= c <= "\u9fff" or "\u3000" <= c <= "\u303f"
              or "\uff00" <= c <= "\uffef")
    return cjk / 1.6 + (len(text) - cjk) / 4


def tokens(messages: list[dict[str, str]]) -> float:
    """A request's prompt tokens: each message's and 4 of framing, 3 to prime the reply."""
    return 3 + sum(4 + fake_tokens(m["content"]) for m in messages)


def test_anchor_re_judging_is_estimated_as_a_stage_of_its_own() -> None:
    """Every judge re-scores the anchor sample once per run: calls = anchors × judges, the
    input the rendered judge prompt of each anchor, and its time comes after judging."""
    drift = DriftParams(anchors=5, seed=3)
    config = CONFIG.model_copy(update={"drift": drift})
    with_drift = estimate_benchmark(PROMPTS, config, REGISTRY, {}, prompt_set="ps-x")
    without = estimate_benchmark(PROMPTS, CONFIG, REGISTRY, {}, prompt_set="ps-x")
    row = next(r for r in with_drift.rows if r.stage == "drift")
    anchors = sample_anchors(load_anchor_set(), 5, 3)
    rubric = load_rubric()
    sent = sum(tokens(render_judge_messages(rubric, a.genre, a.prompt, a.essay, V2))
               for a in anchors)
    assert (row.model, row.calls) == ("j", 5)
    assert row.input_tokens == pytest.approx(sent, rel=1e-3)
    # A v2 judgment: ~30 scores and an analysis of 1,000 characters (half its 4,000, at
    # most 1,000): more than max_tokens 500, so capped.
    assert row.output_tokens == pytest.approx(5 * 500)
    assert with_drift.calls == without.calls + 5
    assert with_drift.wall_s == pytest.approx(without.wall_s + row.wall_s)


def test_estimate_matches_hand_arithmetic() -> None:
    est = estimate_benchmark(PROMPTS, CONFIG, REGISTRY, {}, prompt_set="ps-x")
    rows = {(r.model, r.stage): r for r in est.rows}
    assert list(rows) == [("w", "generate"), ("e", "generate"), ("j", "judge"),
                          ("j", "pairwise")]

    # generate, w: 2 prompts × 2 samples; P0 asks ≥500 characters: 500 × 1.2 = 600
    # characters, 375 tokens; P1 asks nothing: 800 characters, 500 tokens (under w's
    # max_tokens 1000).
    gen_w = rows[("w", "generate")]
    w_in = 2 * (tokens([{"content": P0}]) + tokens([{"content": P1}]))
    w_out = 2 * (375 + 500)
    assert gen_w.calls == 4
    assert gen_w.input_tokens == pytest.approx(w_in)
    assert gen_w.output_tokens == pytest.approx(w_out)
    assert gen_w.cost_usd == pytest.approx((w_in * 2.0 + w_out * 8.0) / 1e6, rel=1e-3)
    assert gen_w.latency_s == pytest.approx(1 + (w_out / 4) / 50)  # 9.75 s, assumed
    assert gen_w.concurrency_s == pytest.approx(2 * 9.75)  # ceil(4 / 2) × latency
    # 3 rpm: 0.05 requests/s, a burst of max(1, 0.5) = 1 request: (4 - 1) / 0.05 = 60 s
    assert gen_w.rpm_s == pytest.approx(60.0) and gen_w.tpm_s is None
    assert gen_w.binding == "rpm" and gen_w.wall_s == pytest.approx(60.0)
    # No history: no latency floor, so the lower bound is the rpm limit's alone.
    assert gen_w.min_latency_s == 0.0 and gen_w.lower_s == pytest.approx(60.0)

    # generate, e: P1's 500 tokens capped at its max_tokens 400; embedded: free.
    gen_e = rows[("e", "generate")]
    assert (gen_e.calls, gen_e.output_tokens, gen_e.cost_usd) == (4, 2 * (375 + 400), 0.0)
    assert gen_e.concurrency_s == pytest.approx(4 * (1 + 775 / 2 / 50))  # one at a time
    assert gen_e.binding == "concurrency" and gen_e.lower_s == 0.0

    # judge, j: every essay (2 prompts × 2 writers × 2 samples) with the rubric prompt;
    # essays of 375, 500, 375 and 400 tokens are 600, 800, 600 and 640 characters.
    rubric = load_rubric()
    frame = {text: tokens(render_judge_messages(rubric, genre, text, "", V2))
             for genre, text in (("argumentative", P0), ("narrative", P1))}
    essay_chars = {P0: (600, 600), P1: (800, 640)}
    j_in = 2 * sum(frame[t] + c / 1.6 for t in (P0, P1) for c in essay_chars[t])
    judge = rows[("j", "judge")]
    assert judge.calls == 8
    assert judge.input_tokens == pytest.approx(j_in, rel=1e-3)
    assert judge.output_tokens == 8 * 500  # the reply the schema asks for, capped
    assert judge.cost_usd == pytest.approx((j_in * 1.0 + 4000 * 4.0) / 1e6, rel=1e-3)
    # tpm: every call is charged characters + max_tokens, at most the bucket (10 s of
    # 6000/min = 1000 tokens); 8 × 1000 - 1000 burst at 100 tokens/s = 70 s.
    assert judge.tpm_s == pytest.approx(70.0)
    assert judge.concurrency_s == pytest.approx(2 * (1 + 500 / 50))
    assert judge.binding == "tpm" and judge.wall_s == pytest.approx(70.0)

    # pairwise, j: all_pairs of (e, w): 1 pair × 2 orders × 2 prompts × 2 samples.
    pframe = {t: tokens(render_pairwise_messages(rubric, g, t, "", "", 4000))
              for g, t in (("argumentative", P0), ("narrative", P1))}
    p_in = 2 * 2 * sum(pframe[t] + sum(essay_chars[t]) / 1.6 for t in (P0, P1))
    pairwise = rows[("j", "pairwise")]
    assert (pairwise.calls, pairwise.output_tokens) == (8, 8 * 300)
    assert pairwise.input_tokens == pytest.approx(p_in, rel=1e-3)
    assert pairwise.binding == "tpm" and pairwise.wall_s == pytest.approx(70.0)

    assert est.calls == 24
    assert est.cost_usd == pytest.approx(
        (w_in * 2 + w_out * 8 + j_in + 4000 * 4 + p_in + 2400 * 4) / 1e6, rel=1e-3)
    # Generate and judge overlap: the slowest model alone is j (70 s), but the slowest
    # writer (w, 60 s) plus one judge call (11 s) is 71 s; pairwise follows: + 70 s.
    assert est.wall_s == pytest.approx(71.0 + 70.0)
    # The lower bound: the limits alone (a call may take no time): j's 70 s, pairwise's.
    assert est.lower_s == pytest.approx(70.0 + 70.0)
    assert any("overlap" in note for note in est.assumptions)
    assert any("every essay comes back ok" in note for note in est.assumptions)


@pytest.mark.parametrize(("when", "bound"), [("all", False), ("flagged", True),
                                              ("borderline", True)])
def test_repeated_judging_is_counted_k_times(when: str, bound: bool) -> None:
    once = estimate_benchmark(PROMPTS, CONFIG, REGISTRY, {}, prompt_set="ps-x")
    judge = CONFIG.judge.model_copy(update={"repeats": 3, "repeat_when": when})
    thrice = estimate_benchmark(PROMPTS, CONFIG.model_copy(update={"judge": judge}), REGISTRY,
                                {}, prompt_set="ps-x")
    row = {(r.model, r.stage): r for r in once.rows}[("j", "judge")]
    row3 = {(r.model, r.stage): r for r in thrice.rows}[("j", "judge")]
    assert (row.calls, row3.calls) == (8, 24)
    assert row3.input_tokens == pytest.approx(3 * row.input_tokens)
    note = next(n for n in thrice.assumptions if "judge.repeats 3" in n)
    assert ("upper bound" in note) is bound


def test_stages_limit_what_is_estimated() -> None:
    est = estimate_benchmark(PROMPTS, CONFIG, REGISTRY, {}, prompt_set="ps-x",
                             stages=("judge", "pairwise"))
    assert [(r.model, r.stage) for r in est.rows] == [("j", "judge"), ("j", "pairwise")]
    assert est.wall_s == pytest.approx(70.0 + 70.0)  # no writer to wait for


def test_unknown_prices_make_the_cost_unknown() -> None:
    assert estimate_benchmark(PROMPTS, CONFIG, REGISTRY, {}, prompt_set="ps-x").cost_usd
    unpriced = Registry(models={**REGISTRY.models, "w": spec("w", rpm=3)})
    est = estimate_benchmark(PROMPTS, CONFIG, unpriced, {}, prompt_set="ps-x")
    assert est.cost_usd is None and est.unpriced == ["w"]
    row = {(r.model, r.stage): r for r in est.rows}[("w", "generate")]
    assert row.cost_usd is None


def test_config_mistakes_are_estimate_errors() -> None:
    missing = CONFIG.model_copy(update={"judge": JudgeParams(judges=["nobody"])})
    with pytest.raises(EstimateError, match="no model named 'nobody'"):
        estimate_benchmark(PROMPTS, missing, REGISTRY, {}, prompt_set="ps-x")
    baseline = CONFIG.model_copy(update={"pairwise": PairwiseParams(
        judges=["j"], design="baseline", baseline="j")})  # j writes no essays
    with pytest.raises(EstimateError, match="baseline 'j' wrote no essays"):
        estimate_benchmark(PROMPTS, baseline, REGISTRY, {}, prompt_set="ps-x")


def _call(model: str, stage: str, status: CallStatus, tokens: tuple[int, int],
          latency: float, age_s: int) -> dict[str, Any]:
    done = datetime(2025, 1, 6, tzinfo=UTC) - timedelta(seconds=age_s)
    result = ChatResult(key=f"{model}-{stage}-{age_s}", model=model, status=status,
                        usage=Usage(*tokens), latency_s=latency, attempts=1,
                        started_at=done, finished_at=done, stage=stage)
    return ledger_row(result, endpoint="http://x.invalid/v1", model_id=model, request="{}")


def test_ledger_statistics_are_preferred(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.duckdb") as ledger:
        ledger.write_rows([
            # the newest two ok generate calls of w: 100/700 and 120/900 tokens
            _call("w", "generate", CallStatus.OK, (100, 700), 4.0, 1),
            _call("w", "generate", CallStatus.OK, (120, 900), 6.0, 2),
            _call("w", "generate", CallStatus.OK, (9999, 9999), 99.0, 3),  # older
            _call("w", "generate", CallStatus.API_ERROR, (9999, 9999), 99.0, 0),  # failed
            _call("j", "judge", CallStatus.OK, (3000, 400), 8.0, 1),
        ])
    stats, unread = read_token_stats(tmp_path, recent=2)
    assert unread is None
    assert stats[("w", "generate")] == TokenStats(2, 110.0, 800.0, 5.0, 4.0)
    assert stats[("j", "judge")] == TokenStats(1, 3000.0, 400.0, 8.0, 8.0)

    est = estimate_benchmark(PROMPTS, CONFIG, REGISTRY, stats, prompt_set="ps-x")
    rows = {(r.model, r.stage): r for r in est.rows}
    gen_w, judge = rows[("w", "generate")], rows[("j", "judge")]
    assert (gen_w.tokens_from, gen_w.latency_from) == ("ledger", "ledger")
    assert (gen_w.input_tokens, gen_w.output_tokens) == (4 * 110.0, 4 * 800.0)
    assert gen_w.concurrency_s == pytest.approx(2 * 5.0)
    # the fastest call seen (4 s) sets the floor: 2 rounds of 2; rpm's 60 s binds
    assert gen_w.floor_s == pytest.approx(2 * 4.0) and gen_w.lower_s == pytest.approx(60.0)
    assert gen_w.cost_usd == pytest.approx((440 * 2.0 + 3200 * 8.0) / 1e6)
    assert (judge.input_tokens, judge.output_tokens) == (8 * 3000.0, 8 * 400.0)
    assert judge.latency_s == 8.0
    # e has no ledger calls: assumed as before, and said so.
    assert rows[("e", "generate")].tokens_from == "assumed"
    assert any("w/generate (2 calls)" in note for note in est.assumptions)
    # w's essays are 800 tokens = 1,280 characters in the pairwise prompts.
    rubric = load_rubric()
    pframe = sum(tokens(render_pairwise_messages(rubric, g, t, "", "", 4000))
                 for g, t in (("argumentative", P0), ("narrative", P1)))
    e_chars = 600 + 640  # e's essays: P0's 600 characters, P1's capped at 400 tokens
    assert rows[("j", "pairwise")].input_tokens == pytest.approx(
        2 * 2 * (pframe + (2 * 1280 + e_chars) / 1.6), rel=1e-3)
    assert not math.isclose(rows[("j", "pairwise")].input_tokens, 0)


def test_a_ledger_held_by_a_writer_is_not_waited_for(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.duckdb") as ledger:
        ledger.write_rows([_call("w", "generate", CallStatus.OK, (100, 700), 4.0, 1)])
        stats, unread = read_token_stats(tmp_path)
    assert stats == {} and unread is not None and "being written" in unread
    assert read_token_stats(tmp_path)[0]  # once the writer is gone
    assert read_token_stats(tmp_path / "nowhere") == ({}, None)
    assert not (tmp_path / "nowhere").exists()
