"""What the judge is asked: one call per (ok essay, judge), the genre's rubric and schema
(k calls for the essays ``judge.repeats``/``repeat_when`` choose, :mod:`.repeats`).

The essays table (generate's output) as the judge reads it, the judge-stage settings,
and the requests built from them. The generate stage builds the same requests to judge
essays while others are still being written (:mod:`essaybench.bench.judge.prefetch`).
"""


from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from essaybench.bench.judge.criteria import default_criteria_block
from essaybench.bench.judge.genre import (
    GenreCall,
    GenreOutcome,
    genre_call,
    needs_genre_call,
)
from essaybench.bench.judge.memo import PREFETCHED, RequestMemo, memo_scope
from essaybench.bench.judge.render import JudgeRenderer
from essaybench.bench.judge.repeats import RepeatWhen, repeat_requests, repeated_upfront
from essaybench.bench.rubrics import (
    AlignScoreRubric,
    JudgePrompt,
    Rubric,
    load_align_score,
    load_judge_prompt,
    load_rubric,
    rubrics_dir,
)
from essaybench.bench.signals.relevance import relevance
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message

STAGE = "judge"

# The essays table (generate's output) as this stage reads it.
ESSAY_KEY_COLUMNS = ("prompt_id", "model", "sample_index")
ESSAY_COLUMNS = (*ESSAY_KEY_COLUMNS, "genre", "prompt_set", "prompt_text", "essay_text",
                 "status")
ESSAY_ERROR_COLUMN = "error"  # optional: why an essay is not ok
# optional: the prompt's allowed genres (null genre: open or a choice; bench/judge/genre.py)
ALLOWED_COLUMN = "allowed_genres"

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
    repeats: int = Field(
        default=1, ge=1, le=15,
        description="Judge calls per essay and judge for the essays repeat_when chooses; "
        "the sub-question median is the score and the spread is stored (odd k advised).")
    repeat_when: RepeatWhen = Field(
        default="all",
        description="Which essays get the repeats: all; flagged (the injection detector "
        "flags them); borderline (their model's cell mean is within borderline_margin of "
        "an adjacent model's, after one call each; see bench/judge/repeats.py).")
    borderline_margin: float = Field(
        default=2.0, ge=0, le=100,
        description="Points (0–100 essay score) within which adjacent models' cell means "
        "make their essays borderline.")
    judge_prompt: str | None = Field(
        default=None, description="Judge prompt file (rubric mode; a bare file name is one "
        "of rubrics/essay/); default judge_prompt.v2.yaml, the injection-hardened one "
        "(per-call markers, rubric in the system role, a nonce the reply must echo). v1 is "
        "the plain one; v3 has v2's defences with a system message the same for every call "
        "of a genre and short score keys (a fraction of the tokens per call).")
    second_judge: str | None = Field(
        default=None, description="A registry model that judges every flagged essay once "
        "more (injection markers or a suspicious judgment): its opinion is stored beside "
        "the first (second_score), never instead of it.")
    genre_max_tokens: int = Field(
        default=256, ge=16, description="max_tokens of the call asking which genre an essay "
        "chose when its prompt left the genre open or offered a choice (a short JSON reply; "
        "see rubrics/essay/genre_prompt.v1.yaml).")
    skip_off_language: bool = Field(
        default=False, description="Do not judge essays the generate stage marked "
        "off_language (not written in Chinese): they are skipped, counted, never scored.")
    skip_off_topic_below: float | None = Field(
        default=None, ge=0, le=1, description="Do not judge essays whose relevance to their "
        "prompt (bench/signals/relevance.py: share of the prompt's topic bigrams in the "
        "essay) is below this (0.03 is the alerts' calibrated threshold): they are skipped "
        "with error_kind essay_off_topic, counted, never scored. None: judge every essay.")
    gold_criteria: bool = Field(
        default=False, description="Put each gold prompt's acceptance criteria (the gold set "
        "attached to the run's prompt set: essaybench gold attach) into its judge calls, "
        "appended to the system message (rubrics/essay/criteria_block.v1.yaml); every "
        "other call is unchanged. Rubric mode only; not with sharding or adaptive sampling.")
    # The criteria the stage resolved from the store (with_criteria): not configuration.
    _criteria: dict[str, tuple[str, ...]] = PrivateAttr(default_factory=dict)
    _criteria_id: str = PrivateAttr(default="")

    @model_validator(mode="after")
    def _criteria_in_rubric_mode(self) -> JudgeParams:
        if self.gold_criteria and self.mode != "rubric":
            raise ValueError("gold_criteria needs mode rubric (align_score has no place for "
                             "them)")
        return self

    def with_criteria(self, criteria: Mapping[str, tuple[str, ...]],
                      identity: str) -> JudgeParams:
        """A copy whose rubric calls carry ``criteria`` (prompt id -> criteria); ``identity``
        names where they come from (the gold set's sha256), for the prefetch's scope."""
        copy = self.model_copy()
        copy._criteria = dict(criteria) if self.gold_criteria else {}
        copy._criteria_id = identity if self.gold_criteria else ""
        return copy

    @property
    def criteria(self) -> dict[str, tuple[str, ...]]:
        return self._criteria

    @property
    def criteria_id(self) -> str:
        return self._criteria_id


Scoring = Rubric | AlignScoreRubric


class Runner(Protocol):
    def run(self, requests: Sequence[ChatRequest]) -> list[ChatResult]: ...


def load_scoring(params: JudgeParams) -> Scoring:
    if params.mode == "align_score":
        return load_align_score(params.rubric_path)
    return load_rubric(params.rubric_path)


DEFAULT_JUDGE_PROMPT = "judge_prompt.v2.yaml"


def load_prompt_for(params: JudgeParams) -> JudgePrompt | None:
    """The judge prompt of rubric mode (None in align_score mode, which has its own)."""
    if params.mode == "align_score":
        return None
    return load_judge_prompt(judge_prompt_path(params.judge_prompt))


def judge_prompt_path(name: str | None) -> Path:
    """The judge prompt file ``judge.judge_prompt`` names: a bare file name (no folder) is
    one of rubrics/essay/, so a config works from any working directory; None the default."""
    name = name if name is not None else DEFAULT_JUDGE_PROMPT
    return rubrics_dir() / name if "/" not in name and os.sep not in name else Path(name)


def make_renderer(params: JudgeParams, rubric: Scoring) -> JudgeRenderer:
    criteria = params.criteria if params.mode == "rubric" else {}
    return JudgeRenderer(rubric, params.analysis_max_chars, load_prompt_for(params), criteria,
                         default_criteria_block() if criteria else None)


def request_scope(params: JudgeParams, rubric: Scoring, renderer: JudgeRenderer) -> str:
    """Everything but the essay that :func:`essay_judge_requests` builds from (the key of
    the prefetch's requests in :data:`~essaybench.bench.judge.memo.PREFETCHED`)."""
    prompt = renderer.judge_prompt
    block = renderer.criteria_block
    # the criteria the calls carry: where they come from and the block's wording
    criteria = f"\ncriteria:{params.criteria_id}:{block.fingerprint}" if block else ""
    return memo_scope(params.model_dump_json() + criteria, rubric.fingerprint,
                      None if prompt is None else prompt.fingerprint)


def skipped_off_language(params: JudgeParams, essay: Mapping[str, Any]) -> bool:
    """Whether ``essay`` (a row of the essays table) is not judged for its language."""
    return params.skip_off_language and bool(essay.get("off_language"))


def skipped_off_topic(params: JudgeParams, essay: Mapping[str, Any]) -> bool:
    """Whether ``essay`` is not judged as off topic (``skip_off_topic_below``); an essay
    whose prompt has no topic word is judged."""
    if params.skip_off_topic_below is None:
        return False
    score = relevance(str(essay["prompt_text"] or ""), str(essay["essay_text"] or ""))
    return score is not None and score < params.skip_off_topic_below


def not_judged(params: JudgeParams, essay: Mapping[str, Any]) -> bool:
    """Whether an ok ``essay`` is skipped (off language or off topic, as configured)."""
    return skipped_off_language(params, essay) or skipped_off_topic(params, essay)


def essay_tag(prompt_id: str, model: str, sample_index: int) -> str:
    return f"{prompt_id}#{model}#{sample_index}"


def check_essays(essays: pl.DataFrame) -> None:
    missing = [c for c in ESSAY_COLUMNS if c not in essays.columns]
    if missing:
        raise ValueError(f"{STAGE}: essays table lacks column(s) {missing}")


def _ok_essays(essays: pl.DataFrame) -> list[dict[str, Any]]:
    # Only the columns a judge call reads: converting every column of 10k rows to Python
    # objects (generation params, raw replies, ...) costs more than the filter.
    extra = [c for c in ("off_language", ALLOWED_COLUMN) if c in essays.columns]
    ok = essays.select(*ESSAY_COLUMNS, *extra).filter(pl.col("status") == CallStatus.OK.value)
    return list(ok.iter_rows(named=True))


def essay_judge_requests(essay: Mapping[str, Any], params: JudgeParams, rubric: Scoring,
                         renderer: JudgeRenderer | None = None) -> list[ChatRequest]:
    """The judge calls of one ok essay (a row of the essays table), in judge order: each
    judge's first call, then its repeats when they are known from the essay alone
    (``repeat_when`` all or flagged). The generate stage uses this too, to judge essays
    while others are still being written (this stage then gets those results from the
    gateway or the ledger). ``renderer`` (for ``rubric``) renders each genre's rubric once
    for many essays. An essay without a genre (open or multi-genre prompt) has none here:
    its genre is asked first (:func:`genre_judge_requests`)."""
    if not_judged(params, essay) or needs_genre_call(essay["genre"]):
        return []
    genre = str(essay["genre"])
    render = renderer or make_renderer(params, rubric)
    messages, schema = render.call(genre, essay["prompt_text"], essay["essay_text"],
                                   render.criteria_of(essay["prompt_id"]))
    tag = essay_tag(essay["prompt_id"], essay["model"], int(essay["sample_index"]))
    sent = tuple(Message(role=m["role"], content=m["content"])  # type: ignore[arg-type]
                 for m in messages)
    firsts = [ChatRequest(model=judge, messages=sent,
                          params={"temperature": params.temperature,
                                  "max_tokens": params.max_tokens},
                          response_schema=schema, stage=STAGE, tag=tag)
              for judge in params.judges]
    if not repeated_upfront(params.repeat_when, params.repeats, str(essay["prompt_text"]),
                            str(essay["essay_text"])):
        return firsts
    return [call for first in firsts for call in (first, *repeat_requests(first,
                                                                          params.repeats))]


def genre_rubric(rubric: Scoring) -> Rubric:
    """Whose genres a genre call offers: the rubric's (Align-Score, which has no genres,
    uses the built-in rubric's names; its scoring does not depend on the genre)."""
    return rubric if isinstance(rubric, Rubric) else load_rubric()


def build_genre_calls(essays: pl.DataFrame, params: JudgeParams,
                      rubric: Scoring) -> dict[tuple[str, str], GenreCall]:
    """(judge, essay tag) → the genre call of every ok essay without a genre, in essay
    order then judge order (each judge decides the genre it scores by)."""
    check_essays(essays)
    named = genre_rubric(rubric)
    calls: dict[tuple[str, str], GenreCall] = {}
    for row in _ok_essays(essays):
        if not_judged(params, row) or not needs_genre_call(row["genre"]):
            continue
        tag = essay_tag(row["prompt_id"], row["model"], int(row["sample_index"]))
        for judge in params.judges:
            calls[(judge, tag)] = genre_call(judge, row, named, tag, STAGE,
                                             params.genre_max_tokens, params.temperature)
    return calls


def genre_judge_requests(essay: Mapping[str, Any], params: JudgeParams, rubric: Scoring,
                         genres: Mapping[tuple[str, str], GenreOutcome],
                         renderer: JudgeRenderer | None = None) -> list[ChatRequest]:
    """The judge calls of an ok essay without a genre: each judge's, with the rubric of
    the genre that judge said the essay chose; none for a judge whose genre call failed."""
    tag = essay_tag(essay["prompt_id"], essay["model"], int(essay["sample_index"]))
    requests: list[ChatRequest] = []
    for judge in params.judges:
        outcome = genres.get((judge, tag))
        if outcome is None or outcome.genre is None:
            continue
        requests += essay_judge_requests({**essay, "genre": outcome.genre},
                                         params.model_copy(update={"judges": [judge]}),
                                         rubric, renderer)
    return requests


def build_judge_requests(essays: pl.DataFrame, params: JudgeParams, rubric: Scoring,
                         genres: Mapping[tuple[str, str], GenreOutcome] | None = None,
                         memo: RequestMemo | None = PREFETCHED) -> list[ChatRequest]:
    """The requests of every ok essay (:func:`essay_judge_requests`), in essay order then
    judge order: one per judge, and the repeats known before judging. ``genres``: the
    genre calls' outcomes of the essays without a genre (none of theirs without it).
    ``memo``: where the prefetch left the requests it built (taken, not rebuilt)."""
    check_essays(essays)
    renderer = make_renderer(params, rubric)
    scope = request_scope(params, rubric, renderer) if memo is not None else ""
    requests: list[ChatRequest] = []
    for row in _ok_essays(essays):
        if needs_genre_call(row["genre"]):
            requests += genre_judge_requests(row, params, rubric, genres or {}, renderer)
            continue
        found = (memo.take(scope, row) if memo is not None
                 and not not_judged(params, row) else None)
        requests += (found if found is not None
                     else essay_judge_requests(row, params, rubric, renderer))
    return requests
