"""The judge stage: one LLM judgment per (essay, judge), scored only when it parses.

Every essay the generate stage produced with status ``ok`` is sent to every judge, in
one call, with the genre's rubric (or, in ``align_score`` mode, the Align-Score
baseline) and the answer schema; the gateway re-asks on schema failures within its
budget. Every (essay, judge) pair ends as exactly one row with a status:

- ``ok``: the reply parsed; sub-scores and the computed essay scores are filled in;
- ``parse_error``: a reply came but is not a valid judgment (raw reply kept);
- ``api_error`` / ``refused`` / ``truncated``: the call itself failed;
- ``skipped``: the essay was not ``ok`` upstream, so nothing was sent.

No row other than ``ok`` carries a score, ever (DESIGN.md §3).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from essaybench.curate.table import Decision, StageOutput
from essaybench.judge_render import JudgeRenderer
from essaybench.llm.structured import StructuredError, reply_object
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message
from essaybench.rubrics import (
    AlignScore,
    Rubric,
    load_align_score,
    load_rubric,
)
from essaybench.scoring import TraitScorer, TraitSpec, align_score

STAGE = "judge"

# The essays table (generate's output) as this stage reads it.
ESSAY_KEY_COLUMNS = ("prompt_id", "model", "sample_index")
ESSAY_COLUMNS = (*ESSAY_KEY_COLUMNS, "genre", "prompt_set", "prompt_text", "essay_text",
                 "status")
ESSAY_ERROR_COLUMN = "error"  # optional: why an essay is not ok

JUDGMENT_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    "prompt_id": pl.Utf8,
    "model": pl.Utf8,  # the model that wrote the essay
    "sample_index": pl.Int64,
    "genre": pl.Utf8,
    "prompt_set": pl.Utf8,
    "judge": pl.Utf8,  # registry name of the judge
    "judge_returned_model": pl.Utf8,  # the model id the API said it used
    "rubric_id": pl.Utf8,
    "rubric_fingerprint": pl.Utf8,
    "mode": pl.Utf8,
    "status": pl.Utf8,
    "decision": pl.Utf8,  # "kept" for ok rows, else the status (stage bookkeeping)
    "error": pl.Utf8,
    "raw_reply": pl.Utf8,
    "analysis": pl.Utf8,
    "scores": pl.Utf8,  # JSON: question id → int; null unless ok
    "alpha": pl.Float64,
    "score_weighted": pl.Float64,
    "score_unweighted": pl.Float64,
    "trait_scores": pl.Utf8,  # JSON: trait id → Σ q_i
    "align_total": pl.Float64,
    "dimension_mean": pl.Float64,
    "from_ledger": pl.Boolean,
    "call_key": pl.Utf8,
}


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


class JudgmentError(ValueError):
    """A reply that is not a valid judgment; the message names the offending question."""


class Runner(Protocol):
    def run(self, requests: Sequence[ChatRequest]) -> list[ChatResult]: ...


def load_scoring(params: JudgeParams) -> Scoring:
    if params.mode == "align_score":
        return load_align_score(params.rubric_path)
    return load_rubric(params.rubric_path)


def essay_tag(prompt_id: str, model: str, sample_index: int) -> str:
    return f"{prompt_id}#{model}#{sample_index}"


def _check_essays(essays: pl.DataFrame) -> None:
    missing = [c for c in ESSAY_COLUMNS if c not in essays.columns]
    if missing:
        raise ValueError(f"{STAGE}: essays table lacks column(s) {missing}")


def _ok_essays(essays: pl.DataFrame) -> list[dict[str, Any]]:
    # Only the columns a judge call reads: converting every column of 10k rows to Python
    # objects (generation params, raw replies, ...) costs more than the filter.
    ok = essays.select(ESSAY_COLUMNS).filter(pl.col("status") == CallStatus.OK.value)
    return list(ok.iter_rows(named=True))


def _question_ids(scoring: Scoring, genre: str) -> list[str]:
    if isinstance(scoring, AlignScore):
        return scoring.score_ids()
    return scoring.question_ids(genre)


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
    _check_essays(essays)
    renderer = JudgeRenderer(rubric, params.analysis_max_chars)
    return [request for row in _ok_essays(essays)
            for request in essay_judge_requests(row, params, rubric, renderer)]


def _as_object(parsed_or_text: Any) -> Mapping[str, Any]:
    try:
        return reply_object(parsed_or_text)
    except StructuredError as exc:
        raise JudgmentError(str(exc)) from exc


def parse_scores(parsed_or_text: Any, ids: Sequence[str],
                 score_range: tuple[int, int]) -> dict[str, int]:
    """``scores`` of a reply: exactly ``ids``, each a true int within ``score_range``."""
    return _scores_of(_as_object(parsed_or_text), tuple(ids), frozenset(ids), score_range)


def _scores_of(reply: Mapping[str, Any], ids: tuple[str, ...], known: frozenset[str],
               score_range: tuple[int, int]) -> dict[str, int]:
    """:func:`parse_scores` on a reply already read as an object, with ``known`` =
    ``frozenset(ids)`` computed once per genre rather than once per judgment."""
    scores = reply.get("scores")
    if not isinstance(scores, Mapping):
        raise JudgmentError("reply has no 'scores' object")
    lo, hi = score_range
    if not known.issuperset(scores):
        extra = [str(k) for k in scores if k not in known]
        raise JudgmentError(f"unknown question id(s) in scores: {', '.join(extra)}")
    result: dict[str, int] = {}
    for qid in ids:
        if qid not in scores:
            raise JudgmentError(f"question {qid}: missing score")
        value = scores[qid]
        # JSON Schema's "integer" accepts 7.0; a judge that writes 7.0 is not followed exactly,
        # and True is a parsing accident, not a 1. (A plain int, the common case, skips the
        # two isinstance checks.)
        if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
            raise JudgmentError(f"question {qid}: score must be an integer, got {value!r}")
        if not lo <= value <= hi:
            raise JudgmentError(f"question {qid}: score {value} outside {lo}..{hi}")
        result[qid] = value
    return result


def parse_judgment(parsed_or_text: Any, rubric: Scoring, genre: str) -> dict[str, int]:
    """The judge's sub-scores for ``genre``; raises :class:`JudgmentError` naming the question."""
    return parse_scores(parsed_or_text, _question_ids(rubric, genre), rubric.score_range)


def _analysis(reply: Mapping[str, Any]) -> str | None:
    value = reply.get("analysis")
    return value if isinstance(value, str) else None


def trait_specs(rubric: Rubric, genre: str) -> list[TraitSpec]:
    return [TraitSpec(t.id, t.depth, tuple(q.id for q in t.questions))
            for t in rubric.genre(genre).traits]


# json.dumps(..., ensure_ascii=False) builds a new encoder per call; one shared encoder
# writes the same text.
_JSON = json.JSONEncoder(ensure_ascii=False)


class _Judgments:
    """Reads and scores one rubric's judgments. What depends only on the genre (question
    ids, the trait scorer) is worked out once per genre, not once per judgment."""

    def __init__(self, rubric: Scoring) -> None:
        self.rubric = rubric
        self._ids: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {}
        self._scorers: dict[str, TraitScorer] = {}

    def _question_ids(self, genre: str) -> tuple[tuple[str, ...], frozenset[str]]:
        if genre not in self._ids:
            ids = tuple(_question_ids(self.rubric, genre))
            self._ids[genre] = ids, frozenset(ids)
        return self._ids[genre]

    def _score_columns(self, genre: str, scores: dict[str, int]) -> dict[str, Any]:
        rubric = self.rubric
        if isinstance(rubric, AlignScore):
            dims = {d.id: scores[d.id] for d in rubric.dimensions}
            result = align_score(dims, scores[rubric.overall.id])
            return {"align_total": result.total, "dimension_mean": result.dimension_mean}
        # Built on first use, inside the caller's try: a scorer that refuses the rubric
        # makes a parse_error row, as a refused score does.
        if genre not in self._scorers:
            self._scorers[genre] = TraitScorer(trait_specs(rubric, genre),
                                               rubric.alpha_default)
        weighted, unweighted = self._scorers[genre].scores(scores)
        return {"alpha": rubric.alpha_default, "score_weighted": weighted.total,
                "score_unweighted": unweighted.total,
                "trait_scores": _JSON.encode(dict(weighted.trait_scores))}

    def columns(self, genre: str, reply: Any) -> dict[str, Any]:
        """The status, error, analysis and score columns of a reply that came back."""
        ids, known = self._question_ids(genre)
        analysis: str | None = None
        try:
            obj = _as_object(reply)  # read once, for the analysis and the scores
            analysis = _analysis(obj)
            scores = _scores_of(obj, ids, known, self.rubric.score_range)
            scored = self._score_columns(genre, scores)
        except ValueError as exc:  # JudgmentError, or scoring.py refusing the scores
            return {"status": CallStatus.PARSE_ERROR.value, "error": str(exc),
                    "analysis": analysis}
        return {"status": CallStatus.OK.value, "analysis": analysis,
                "scores": _JSON.encode(scores), **scored}


def _judged_row(base: dict[str, Any], result: ChatResult, judgments: _Judgments,
                genre: str) -> dict[str, Any]:
    row = {**base, "judge_returned_model": result.returned_model, "raw_reply": result.text,
           "from_ledger": result.from_ledger, "call_key": result.key}
    if result.status is not CallStatus.OK:
        row.update(status=result.status.value, error=result.error)
    else:
        reply = result.parsed if result.parsed is not None else result.text
        row.update(judgments.columns(genre, reply))
    return row


def judgments_table(essays: pl.DataFrame, requests: Sequence[ChatRequest],
                    results: Sequence[ChatResult], rubric: Scoring,
                    params: JudgeParams) -> pl.DataFrame:
    """One row per (essay, judge), in essay order then judge order."""
    _check_essays(essays)
    if len(requests) != len(results):
        raise ValueError(f"{len(requests)} requests but {len(results)} results")
    by_call = {(req.model, req.tag): res for req, res in zip(requests, results, strict=True)}
    rows: list[dict[str, Any]] = []
    judgments = _Judgments(rubric)
    # The same for every row (and the fingerprint is a pydantic private attribute, slow to
    # read 10k times).
    common = {"rubric_id": rubric.id, "rubric_fingerprint": rubric.fingerprint,
              "mode": params.mode}
    wanted = [*ESSAY_COLUMNS, *([ESSAY_ERROR_COLUMN] if ESSAY_ERROR_COLUMN in essays.columns
                                else [])]
    for essay in essays.select(wanted).iter_rows(named=True):
        genre = str(essay["genre"])
        tag = essay_tag(essay["prompt_id"], essay["model"], int(essay["sample_index"]))
        for judge in params.judges:
            base: dict[str, Any] = {
                **{c: essay[c] for c in (*ESSAY_KEY_COLUMNS, "genre", "prompt_set")},
                "judge": judge, **common}
            if essay["status"] != CallStatus.OK.value:
                why = essay.get(ESSAY_ERROR_COLUMN)
                rows.append({**base, "status": CallStatus.SKIPPED.value,
                             "error": f"essay status {essay['status']}"
                                      + (f": {why}" if why else "")})
                continue
            result = by_call.get((judge, tag))
            if result is None:
                raise ValueError(f"no result for judge {judge!r} on essay {tag}")
            rows.append(_judged_row(base, result, judgments, genre))
    for row in rows:
        row["decision"] = (Decision.KEPT.value if row["status"] == CallStatus.OK.value
                           else row["status"])
    return pl.DataFrame(rows, schema=JUDGMENT_SCHEMA, orient="row") if rows else \
        pl.DataFrame(schema=JUDGMENT_SCHEMA)


def status_counts(table: pl.DataFrame) -> dict[str, dict[str, int]]:
    """judge → status → rows."""
    counts: dict[str, Counter[str]] = {}
    for judge, status in table.select("judge", "status").iter_rows():
        counts.setdefault(str(judge), Counter())[str(status)] += 1
    return {judge: dict(c) for judge, c in counts.items()}


def run_judge(essays: pl.DataFrame, params: JudgeParams, session: Runner) -> StageOutput:
    """Judge every ok essay with every judge; the session's ledger makes reruns free."""
    rubric = load_scoring(params)
    requests = build_judge_requests(essays, params, rubric)
    results = session.run(requests) if requests else []
    table = judgments_table(essays, requests, results, rubric, params)
    return StageOutput(table, meta={
        "counts": status_counts(table), "mode": params.mode, "rubric_id": rubric.id,
        "rubric_fingerprint": rubric.fingerprint,
        "rubric_path": str(Path(params.rubric_path)) if params.rubric_path else None,
        "requests": len(requests),
        "from_ledger": sum(r.from_ledger for r in results)})
