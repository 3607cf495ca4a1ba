"""What the judge is asked: one call per (ok essay, judge), the genre's rubric and schema.

The essays table (generate's output) as the judge reads it, the judge-stage settings,
and the requests built from them. The generate stage builds the same requests to judge
essays while others are still being written (:mod:`essaybench.bench.judge.prefetch`).
"""


from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from essaybench.bench.judge.render import JudgeRenderer
from essaybench.bench.rubrics import AlignScore, Rubric, load_align_score, load_rubric
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message

STAGE = "judge"

# The essays table (generate's output) as this stage reads it.
ESSAY_KEY_COLUMNS = ("prompt_id", "model", "sample_index")
ESSAY_COLUMNS = (*ESSAY_KEY_COLUMNS, "genre", "prompt_set", "prompt_text", "essay_text",
                 "status")
ESSAY_ERROR_COLUMN = "error"  # optional: why an essay is not ok

class JudgeParams(BaseModel):
    """Judge-stage settings. ``rubric_path`` is the mode's scoring file (rubric or
    Align-Score); the built-in one when unset."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    judges: list[str] = Field(min_length=1)
    mode: Literal["rubric", "align_score"] = "rubric"
    temperature: float = Field(default=0.2, ge=0)
    max_tokens: int = Field(default=2048, ge=1)
    rubric_path: str | None = None
    analysis_max_chars: int = Field(
        default=4000, ge=50, le=20000,
        description="maxLength of the judge's analysis; a local llama.cpp judge needs a few "
        "hundred (its grammar parser rejects thousands).")


Scoring = Rubric | AlignScore


class Runner(Protocol):
    def run(self, requests: Sequence[ChatRequest]) -> list[ChatResult]: ...


def load_scoring(params: JudgeParams) -> Scoring:
    if params.mode == "align_score":
        return load_align_score(params.rubric_path)
    return load_rubric(params.rubric_path)


def essay_tag(prompt_id: str, model: str, sample_index: int) -> str:
    return f"{prompt_id}#{model}#{sample_index}"


def check_essays(essays: pl.DataFrame) -> None:
    missing = [c for c in ESSAY_COLUMNS if c not in essays.columns]
    if missing:
        raise ValueError(f"{STAGE}: essays table lacks column(s) {missing}")


def _ok_essays(essays: pl.DataFrame) -> list[dict[str, Any]]:
    # Only the columns a judge call reads: converting every column of 10k rows to Python
    # objects (generation params, raw replies, ...) costs more than the filter.
    ok = essays.select(ESSAY_COLUMNS).filter(pl.col("status") == CallStatus.OK.value)
    return list(ok.iter_rows(named=True))


def essay_judge_requests(essay: Mapping[str, Any], params: JudgeParams, rubric: Scoring,
                         renderer: JudgeRenderer | None = None) -> list[ChatRequest]:
    """The judge calls of one ok essay (a row of the essays table), in judge order. The
    generate stage uses this too, to judge essays while others are still being written
    (this stage then gets those results from the gateway or the ledger). ``renderer`` (for
    ``rubric``) renders each genre's rubric once for many essays."""
    genre = str(essay["genre"])
    render = renderer or JudgeRenderer(rubric, params.analysis_max_chars)
    messages = render.messages(genre, essay["prompt_text"], essay["essay_text"])
    tag = essay_tag(essay["prompt_id"], essay["model"], int(essay["sample_index"]))
    sent = tuple(Message(role=m["role"], content=m["content"])  # type: ignore[arg-type]
                 for m in messages)
    return [ChatRequest(model=judge, messages=sent,
                        params={"temperature": params.temperature,
                                "max_tokens": params.max_tokens},
                        response_schema=render.schema(genre), stage=STAGE, tag=tag)
            for judge in params.judges]


def build_judge_requests(essays: pl.DataFrame, params: JudgeParams,
                         rubric: Scoring) -> list[ChatRequest]:
    """One request per ok essay per judge, in essay order then judge order."""
    check_essays(essays)
    renderer = JudgeRenderer(rubric, params.analysis_max_chars)
    return [request for row in _ok_essays(essays)
            for request in essay_judge_requests(row, params, rubric, renderer)]
