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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from essaybench.bench.health import call_counts
from essaybench.bench.judge.parse import (
    analysis_of,
    as_object,
    question_ids,
    scores_of,
)
from essaybench.bench.judge.request import (
    ESSAY_COLUMNS,
    ESSAY_ERROR_COLUMN,
    ESSAY_KEY_COLUMNS,
    JudgeParams,
    Runner,
    Scoring,
    build_judge_requests,
    check_essays,
    essay_tag,
    load_scoring,
)
from essaybench.bench.rubrics import AlignScore, Rubric
from essaybench.bench.scoring import TraitScorer, TraitSpec, align_score
from essaybench.core.contracts import Decision, StageOutput
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult

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
    "error_kind": pl.Utf8,  # why not ok: the call's (read_timeout, schema…), or essay_<status>
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


INVALID_JUDGMENT = "invalid_judgment"  # a reply came, but its scores could not be read


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
            ids = tuple(question_ids(self.rubric, genre))
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
            obj = as_object(reply)  # read once, for the analysis and the scores
            analysis = analysis_of(obj)
            scores = scores_of(obj, ids, known, self.rubric.score_range)
            scored = self._score_columns(genre, scores)
        except ValueError as exc:  # JudgmentError, or scoring.py refusing the scores
            return {"status": CallStatus.PARSE_ERROR.value, "error": str(exc),
                    "error_kind": INVALID_JUDGMENT, "analysis": analysis}
        return {"status": CallStatus.OK.value, "analysis": analysis,
                "scores": _JSON.encode(scores), **scored}


def _judged_row(base: dict[str, Any], result: ChatResult, judgments: _Judgments,
                genre: str) -> dict[str, Any]:
    row = {**base, "judge_returned_model": result.returned_model, "raw_reply": result.text,
           "from_ledger": result.from_ledger, "call_key": result.key}
    if result.status is not CallStatus.OK:
        row.update(status=result.status.value, error=result.error,
                   error_kind=result.error_kind)
    else:
        reply = result.parsed if result.parsed is not None else result.text
        row.update(judgments.columns(genre, reply))
    return row


def judgments_table(essays: pl.DataFrame, requests: Sequence[ChatRequest],
                    results: Sequence[ChatResult], rubric: Scoring,
                    params: JudgeParams) -> pl.DataFrame:
    """One row per (essay, judge), in essay order then judge order."""
    check_essays(essays)
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
                             "error_kind": f"essay_{essay['status']}",
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
    calls = {judge: c.model_dump() for judge, c in call_counts(table, "judge").items()}
    return StageOutput(table, run_meta={"calls": calls}, meta={
        "counts": status_counts(table), "calls": calls, "mode": params.mode,
        "rubric_id": rubric.id,
        "rubric_fingerprint": rubric.fingerprint,
        "rubric_path": str(Path(params.rubric_path)) if params.rubric_path else None,
        "requests": len(requests),
        "from_ledger": sum(r.from_ledger for r in results)})
