"""The estimate of a run with open and multi-genre prompts: one genre call per essay and
judge on top of the judgment, checked against hand arithmetic."""

from __future__ import annotations

import json

import polars as pl
import pytest

from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.estimate import estimate_benchmark
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.genre import genre_call
from essaybench.bench.judge.request import JudgeParams
from essaybench.bench.rubrics import (
    load_judge_prompt,
    load_rubric,
    render_judge_messages,
    rubrics_dir,
)
from essaybench.llm.registry import ModelSpec, Registry

P0 = "写一篇不少于500字的议论文，谈谈诚信。"  # 500 × 1.2 = 600 characters
P1 = "写一篇不少于500字的议论文或记叙文，题目自拟。"  # the same length, a choice of two
REGISTRY = Registry(models={s.name: s for s in (
    ModelSpec(name="w", provider="t", base_url="http://x.invalid/v1", model_id="w",
              family="fake", default_params={"max_tokens": 1000}),
    ModelSpec(name="j", provider="t", base_url="http://x.invalid/v1", model_id="j",
              family="fake", price_input_per_mtok=1.0, price_output_per_mtok=4.0))})
CONFIG = BenchmarkConfig(generate=GenerateParams(models=("w",), samples=2),
                         judge=JudgeParams(judges=["j"], max_tokens=500, genre_max_tokens=64),
                         drift=None)
V2 = load_judge_prompt(rubrics_dir() / "judge_prompt.v2.yaml")


def _prompts(genre: str | None, allowed: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"prompt_id": ["p0", "p1"], "genre": ["argumentative", genre],
                         "prompt_set": ["constrained", "constrained"], "text": [P0, P1],
                         "allowed_genres": [["argumentative"], allowed]})


def tokens(messages: list[dict[str, str]]) -> float:
    """The fake tokenizer family's count (configs/token_ratios.yaml): 1.6 CJK characters
    or 4 others per token, 4 per message, 3 per request."""
    def count(text: str) -> float:
        cjk = sum(1 for c in text if "\u4e00" <= c <= "\u9fff" or "\u3000" <= c <= "\u303f"
                  or "\uff00" <= c <= "\uffef")
        return cjk / 1.6 + (len(text) - cjk) / 4
    return 3 + sum(4 + count(m["content"]) for m in messages)


def test_a_choice_prompt_adds_one_genre_call_per_essay_and_judge() -> None:
    choice = estimate_benchmark(_prompts(None, ["argumentative", "narrative"]), CONFIG,
                                REGISTRY, {}, prompt_set="ps-x")
    judge = next(r for r in choice.rows if r.stage == "judge")
    rubric = load_rubric()
    essay = 600 / 1.6  # tokens of each essay's 600 characters (both ask for at least 500)
    frame0 = tokens(render_judge_messages(rubric, "argumentative", P0, "", V2))
    # The choice prompt's judgment: the larger of its two rubrics (an upper bound).
    frame1 = max(tokens(render_judge_messages(rubric, g, P1, "", V2))
                 for g in ("argumentative", "narrative"))
    call = genre_call("j", {"prompt_text": P1, "essay_text": "",
                            "allowed_genres": ["argumentative", "narrative"]},
                      rubric, "", "judge", 64, 0.2)
    ask = tokens([{"content": m.content} for m in call.request.messages])
    assert "- narrative：记叙文" in call.request.messages[0].content
    # 2 samples: 2 judgments per prompt, and 2 genre calls for the choice prompt.
    assert judge.calls == 2 + 2 + 2
    assert judge.input_tokens == pytest.approx(
        2 * ((frame0 + essay) + (frame1 + essay) + (ask + essay)), rel=1e-3)
    # The genre reply is {"nonce": "<16 hex>", "genre": "argumentative"}: 52 characters.
    genre_reply = len(json.dumps({"nonce": "0" * 16, "genre": "argumentative"})) / 4
    assert judge.output_tokens == pytest.approx(2 * 500 + 2 * 500 + 2 * genre_reply,
                                                abs=2)
    assert any("leave the genre open" in note for note in choice.assumptions)

    decided = estimate_benchmark(_prompts("narrative", ["narrative"]), CONFIG, REGISTRY, {},
                                 prompt_set="ps-x")
    assert decided.calls == choice.calls - 2
    assert not any("leave the genre open" in note for note in decided.assumptions)


def test_an_open_prompt_may_choose_any_genre() -> None:
    est = estimate_benchmark(_prompts(None, ["any"]), CONFIG, REGISTRY, {}, prompt_set="ps-x")
    judge = next(r for r in est.rows if r.stage == "judge")
    rubric = load_rubric()
    frame1 = max(tokens(render_judge_messages(rubric, g, P1, "", V2)) for g in rubric.genres)
    call = genre_call("j", {"prompt_text": P1, "essay_text": "", "allowed_genres": ["any"]},
                      rubric, "", "judge", 64, 0.2)
    ask = tokens([{"content": m.content} for m in call.request.messages])
    frame0 = tokens(render_judge_messages(rubric, "argumentative", P0, "", V2))
    assert judge.calls == 6
    assert judge.input_tokens == pytest.approx(
        2 * ((frame0 + 375) + (frame1 + 375) + (ask + 375)), rel=1e-3)
