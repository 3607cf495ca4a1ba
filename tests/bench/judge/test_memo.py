"""The prefetch's judge requests handed to the judge stage (bench/judge/memo.py)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import polars as pl
import pytest

from essaybench.bench.generate import GenerateParams, build_requests
from essaybench.bench.judge.judgments import judgments_table
from essaybench.bench.judge.memo import PREFETCHED, RequestMemo
from essaybench.bench.judge.prefetch import JudgePrefetch
from essaybench.bench.judge.reading import PREFETCHED_READS, JudgmentReader
from essaybench.bench.judge.request import (
    JudgeParams,
    build_judge_requests,
    load_scoring,
    make_renderer,
)
from essaybench.bench.rubrics import Rubric
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message

PROMPT = "描写家乡的秋天。"
ESSAY = "秋天的家乡，稻田金黄，风里有桂花的香气。"
PROMPTS = pl.DataFrame({"prompt_id": ["p1"], "text": [PROMPT], "genre": ["descriptive"],
                        "prompt_set": ["open"]})


@pytest.fixture(autouse=True)
def _empty_memo() -> Iterator[None]:
    PREFETCHED.forget()
    PREFETCHED_READS.forget()
    yield
    PREFETCHED.forget()
    PREFETCHED_READS.forget()


def _essays(text: str = ESSAY, **extra: object) -> pl.DataFrame:
    return pl.DataFrame({"prompt_id": ["p1"], "model": ["w"], "sample_index": [0],
                         "genre": ["descriptive"], "prompt_set": ["open"],
                         "prompt_text": [PROMPT], "essay_text": [text], "status": ["ok"],
                         **{k: [v] for k, v in extra.items()}})


def _prefetch(params: JudgeParams) -> JudgePrefetch:
    prefetch = JudgePrefetch.for_prompts(PROMPTS, params)
    assert prefetch is not None
    return prefetch


def _prefetched(params: JudgeParams, text: str = ESSAY,
                prefetch: JudgePrefetch | None = None) -> list[ChatRequest]:
    [request] = build_requests(PROMPTS, GenerateParams(models=("w",)))
    return (prefetch or _prefetch(params))(
        request, ChatResult(key="k", model="w", status=CallStatus.OK, text=text))


def _reply(params: JudgeParams, request: ChatRequest, score: int) -> ChatResult:
    """A well-formed judgment of ``request`` (its nonce echoed), every sub-score ``score``."""
    rubric = load_scoring(params)
    assert isinstance(rubric, Rubric)  # JudgeParams' default mode, not align_score
    renderer = make_renderer(params, rubric)
    keys = renderer.reply_keys("descriptive") or rubric.question_ids("descriptive")
    nonce = renderer.expected_nonce("descriptive", PROMPT, ESSAY)
    body = {"analysis": "层次清楚。", "scores": dict.fromkeys(keys, score),
            **({"nonce": nonce} if nonce else {})}
    return ChatResult(key=f"key-{request.model}-{score}", model=request.model,
                      status=CallStatus.OK, text=json.dumps(body, ensure_ascii=False),
                      parsed=body)


def test_the_judge_stage_takes_the_requests_the_prefetch_built() -> None:
    params = JudgeParams(judges=["j1", "j2"], repeats=3)
    sent = _prefetched(params)
    assert len(sent) == 6 and len(PREFETCHED) == 1
    rubric = load_scoring(params)
    taken = build_judge_requests(_essays(), params, rubric)
    assert all(a is b for a, b in zip(taken, sent, strict=True))  # not rendered again
    assert taken == build_judge_requests(_essays(), params, rubric, memo=None)
    # handed over once: the next build renders its own, equal requests
    assert len(PREFETCHED) == 0
    again = build_judge_requests(_essays(), params, rubric)
    assert again == sent and not any(a is b for a, b in zip(again, sent, strict=True))


@pytest.mark.parametrize("change", ["essay", "temperature", "judge_prompt", "judges"])
def test_requests_built_from_other_inputs_are_never_served(change: str) -> None:
    params = JudgeParams(judges=["j1"])
    sent = _prefetched(params)
    essays = _essays("另一篇：秋天的家乡。" if change == "essay" else ESSAY)
    updates: dict[str, dict[str, Any]] = {
        "temperature": {"temperature": 0.9},
        "judge_prompt": {"judge_prompt": "judge_prompt.v1.yaml"},
        "judges": {"judges": ["j2"]}}
    asked = params.model_copy(update=updates.get(change, {}))
    rubric = load_scoring(asked)
    built = build_judge_requests(essays, asked, rubric)
    assert built == build_judge_requests(essays, asked, rubric, memo=None)
    assert built != sent and len(PREFETCHED) == 1  # left for its own essay


def test_an_essay_the_stage_skips_takes_nothing() -> None:
    params = JudgeParams(judges=["j1"], skip_off_language=True)
    _prefetched(params)
    assert build_judge_requests(_essays(off_language=True), params,
                                load_scoring(params)) == []
    assert len(PREFETCHED) == 1


def test_the_memo_starts_again_past_its_bound() -> None:
    memo = RequestMemo(max_essays=2)
    request = ChatRequest(model="j", messages=(Message(role="user", content="x"),),
                          stage="judge", tag="t")
    rows = [{"prompt_id": f"p{i}", "model": "w", "sample_index": 0, "genre": "g",
             "prompt_text": "题", "essay_text": "文"} for i in range(3)]
    for row in rows:
        memo.remember("s", row, [request])
    assert len(memo) == 1 and memo.take("s", rows[0]) is None
    assert memo.take("other scope", rows[2]) is None
    assert memo.take("s", rows[2]) == [request] and len(memo) == 0


def test_the_judge_stage_takes_what_the_prefetch_read_of_the_same_result() -> None:
    params = JudgeParams(judges=["j1", "j2"])
    prefetch = _prefetch(params)
    sent = _prefetched(params, prefetch=prefetch)
    results = [_reply(params, r, 8) for r in sent]
    for request, result in zip(sent, results, strict=True):
        prefetch.settled(request, result)  # the gateway commits and tells the follow-up
    assert len(PREFETCHED_READS) == 2
    rubric = load_scoring(params)
    early = [PREFETCHED_READS._reads[k][1] for k in list(PREFETCHED_READS._reads)]
    taken = judgments_table(_essays(), sent, results, rubric, params)
    assert len(PREFETCHED_READS) == 0  # both taken
    # what the stage would have read itself, column for column
    fresh = judgments_table(_essays(), sent, results, rubric, params)
    assert taken.equals(fresh) and taken["status"].to_list() == ["ok", "ok"]
    assert all(read.scores is not None and read.total is not None for read in early)


def test_a_read_is_served_only_for_the_same_result_genre_and_nonce() -> None:
    params = JudgeParams(judges=["j1"])
    rubric = load_scoring(params)
    renderer = make_renderer(params, rubric)
    [request] = _prefetched(params)
    result = _reply(params, request, 7)
    nonce = renderer.expected_nonce("descriptive", PROMPT, ESSAY)
    early = JudgmentReader(rubric, renderer).read("descriptive", result, nonce)
    PREFETCHED_READS.remember("s", "descriptive", nonce, result, early)
    reader = JudgmentReader(rubric, renderer, PREFETCHED_READS, "s")
    # an equal result that is not the one read (e.g. read back from the ledger): read anew
    twin = dataclasses.replace(result)
    assert reader.read("descriptive", twin, nonce) is not early
    assert reader.read("descriptive", result, "another nonce") is not early
    assert reader.read("narrative", result, nonce) is not early
    assert reader.read("descriptive", result, nonce) is early
    assert reader.read("descriptive", result, nonce) is not early  # handed over once
