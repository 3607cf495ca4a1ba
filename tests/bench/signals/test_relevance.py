"""Relevance: the share of the prompt's topic bigrams in the essay; the flag and its
threshold calibrated on real LLM answers (../shared/data/writingpreferencebench)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import polars as pl
import pytest

from essaybench.bench.signals.params import SignalParams
from essaybench.bench.signals.relevance import (
    relevance,
    relevance_table,
    summarise_relevance,
    topic_bigrams,
)

PROMPT = "以“家乡的秋天”为题，写一篇记叙文，不少于800字。"
ON = "家乡的秋天来得很早。稻田金黄，秋风吹过，家乡的人们开始收割。"
OFF = "人工智能正在改变世界，机器学习让计算机能够从数据中学习。"


def test_relevance_counts_topic_bigrams_not_instructions() -> None:
    topic = topic_bigrams(PROMPT)
    assert {"家乡", "乡的", "的秋", "秋天"} <= topic
    assert not {"一篇", "不少", "少于"} & topic
    in_essay = {b for b in topic if b in ON}
    assert relevance(PROMPT, ON) == pytest.approx(len(in_essay) / len(topic))
    assert relevance(PROMPT, OFF) == 0.0
    assert relevance("写一篇作文", ON) is None  # nothing but instructions


def test_table_statuses_and_per_model_counts() -> None:
    essays = pl.DataFrame({
        "model": ["a", "a", "a", "b"], "prompt_id": ["p1", "p2", "p3", "p1"],
        "sample_index": [0, 0, 0, 0], "status": ["ok", "ok", "ok", "api_error"],
        "prompt_text": [PROMPT, PROMPT, "写一篇作文", PROMPT],
        "essay_text": [ON, OFF, ON, None]})
    table = relevance_table(essays, 0.03)
    assert table["relevance_status"].to_list() == ["on_topic", "off_topic", "unchecked"]
    [a] = summarise_relevance(table)  # b has no ok essay: not in the table
    assert (a.model, a.n_checked, a.n_off_topic, a.n_unchecked) == ("a", 2, 1, 1)
    assert a.off_topic_rate == 0.5


def test_threshold_on_real_answers(shared_data: Path) -> None:
    """Own-prompt answers vs the same answers put against a random other prompt: the
    default threshold flags under 2 % of own-prompt answers and catches over 40 % of
    swapped ones (measured 1.4 % and 43 %; benchmarks/signals_calibration.py)."""
    wpb = shared_data / "writingpreferencebench"
    prompts = {str(r["question_id"]): str(r["prompt"]) for r in map(
        json.loads, (wpb / "prompts.jsonl").open(encoding="utf-8"))}
    answers = [(str(r["question_id"]), str(r["predict0"])) for r in map(
        json.loads, (wpb / "responses_scores.jsonl").open(encoding="utf-8")) if r["predict0"]]
    rng = random.Random(1)
    ids = sorted(prompts)
    threshold = SignalParams().relevance_threshold
    own = [relevance(prompts[q], t) for q, t in answers]
    swapped = [relevance(prompts[rng.choice([i for i in ids if i != q])], t)
               for q, t in answers]
    own_s = [s for s in own if s is not None]
    swapped_s = [s for s in swapped if s is not None]
    assert len(own_s) > 3700
    assert sum(s < threshold for s in own_s) / len(own_s) < 0.02
    assert sum(s < threshold for s in swapped_s) / len(swapped_s) > 0.40
