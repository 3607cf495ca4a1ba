"""The prefetch's judge requests handed to the judge stage (bench/judge/memo.py)."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl
import pytest

from essaybench.bench.generate import GenerateParams, build_requests
from essaybench.bench.judge.memo import PREFETCHED, RequestMemo
from essaybench.bench.judge.prefetch import JudgePrefetch
from essaybench.bench.judge.request import JudgeParams, build_judge_requests, load_scoring
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message

PROMPT = "描写家乡的秋天。"
ESSAY = "秋天的家乡，稻田金黄，风里有桂花的香气。"
PROMPTS = pl.DataFrame({"prompt_id": ["p1"], "text": [PROMPT], "genre": ["descriptive"],
                        "prompt_set": ["open"]})


@pytest.fixture(autouse=True)
def _empty_memo() -> Iterator[None]:
    PREFETCHED.forget()
    yield
    PREFETCHED.forget()


def _essays(text: str = ESSAY, **extra: object) -> pl.DataFrame:
    return pl.DataFrame({"prompt_id": ["p1"], "model": ["w"], "sample_index": [0],
                         "genre": ["descriptive"], "prompt_set": ["open"],
                         "prompt_text": [PROMPT], "essay_text": [text], "status": ["ok"],
                         **{k: [v] for k, v in extra.items()}})


def _prefetched(params: JudgeParams, text: str = ESSAY) -> list[ChatRequest]:
    prefetch = JudgePrefetch.for_prompts(PROMPTS, params)
    assert prefetch is not None
    [request] = build_requests(PROMPTS, GenerateParams(models=("w",)))
    return prefetch(request, ChatResult(key="k", model="w", status=CallStatus.OK, text=text))


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
    update = {"temperature": {"temperature": 0.9},
              "judge_prompt": {"judge_prompt": "judge_prompt.v1.yaml"},
              "judges": {"judges": ["j2"]}}.get(change, {})
    asked = params.model_copy(update=update)
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
