"""The judge stage: one LLM judgment per (essay, judge), scored only when it parses.

Every essay the generate stage produced with status ``ok`` is sent to every judge, in
one call (k calls for the essays ``judge.repeats``/``repeat_when`` choose, combined by
sub-question median: :mod:`.repeats`), with the genre's rubric (or, in ``align_score``
mode, the Align-Score baseline) and the answer schema; the gateway re-asks on schema
failures within its budget. Every (essay, judge) pair ends as exactly one row with a
status:

- ``ok``: the reply parsed; sub-scores and the computed essay scores are filled in (of a
  repeated judgment: at least one call parsed, and the median of those is the score);
- ``parse_error``: a reply came but is not a valid judgment (raw reply kept);
- ``api_error`` / ``refused`` / ``truncated``: the call itself failed;
- ``skipped``: the essay was not ``ok`` upstream, so nothing was sent.

No row other than ``ok`` carries a score, ever (DESIGN.md §3).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from essaybench.bench.health import call_counts
from essaybench.bench.judge.genre import (
    SOURCE_JUDGE,
    SOURCE_PROMPT,
    GenreOutcome,
    allowed_list,
    genre_failure,
    needs_genre_call,
    resolve_genres,
)
from essaybench.bench.judge.reading import (
    JSON,
    PREFETCHED_READS,
    JudgmentReader,
    invalid_columns,
)
from essaybench.bench.judge.repeats import (
    borderline_cells,
    median_scores,
    question_ranges,
    repeat_record,
    repeat_requests,
    spread,
)
from essaybench.bench.judge.request import (
    ALLOWED_COLUMN,
    ESSAY_COLUMNS,
    ESSAY_ERROR_COLUMN,
    ESSAY_KEY_COLUMNS,
    JudgeParams,
    Runner,
    Scoring,
    build_genre_calls,
    build_judge_requests,
    check_essays,
    essay_tag,
    load_scoring,
    make_renderer,
    request_scope,
    skipped_off_language,
    skipped_off_topic,
)
from essaybench.core.contracts import Decision, StageOutput
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult

JUDGMENT_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    "prompt_id": pl.Utf8,
    "model": pl.Utf8,  # the model that wrote the essay
    "sample_index": pl.Int64,
    "genre": pl.Utf8,  # the genre scored: the prompt's, or the one the essay chose
    "prompt_set": pl.Utf8,
    "judge": pl.Utf8,  # registry name of the judge
    # Open and multi-genre prompts (bench/judge/genre.py): the essay's genre (null when
    # its genre call failed), who decided it (prompt | judge), the prompt's allowed genres
    # (JSON list; null for a single-genre prompt) and the genre call.
    "essay_genre": pl.Utf8,
    "genre_source": pl.Utf8,
    "allowed_genres": pl.Utf8,
    "genre_call_key": pl.Utf8,
    "genre_call_status": pl.Utf8,
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
    "from_ledger": pl.Boolean,  # every call of the row was served from the ledger
    "call_key": pl.Utf8,  # the call whose reply and analysis the row shows
    # Repeated judging (bench/judge/repeats.py); null for skipped rows.
    "repeats": pl.Int64,  # judge calls made for this (essay, judge)
    "repeats_ok": pl.Int64,  # of those, the ones that parsed and scored
    "repeat_reason": pl.Utf8,  # all | flagged | borderline, when repeated
    "score_spread": pl.Float64,  # max − min main score over ok calls (≥ 2 of them)
    "question_ranges": pl.Utf8,  # JSON: question id → max − min over ok calls
    "repeat_calls": pl.Utf8,  # JSON: per call {repeat, status, call_key, score, error}
}


def _judged_row(base: dict[str, Any], results: Sequence[ChatResult], judgments: JudgmentReader,
                genre: str, reason: str, nonce: str | None = None) -> dict[str, Any]:
    """The row of one (essay, judge) from its calls (repeat 0 first). One call: its read.
    Several: the median of the calls that scored (module ``repeats``), with the spread;
    the row's reply, analysis and call are those of the first call that scored (else of
    the first call)."""
    reads = [judgments.read(genre, result, nonce) for result in results]
    scored = [r for r in reads if r.scores is not None]
    lead = scored[0] if scored else reads[0]
    row = {**base, "judge_returned_model": lead.result.returned_model,
           "raw_reply": lead.result.text, "from_ledger": all(r.from_ledger for r in results),
           "call_key": lead.result.key, "repeats": len(reads), "repeats_ok": len(scored)}
    if len(reads) == 1:
        return {**row, **lead.columns}
    runs = [r.scores for r in scored if r.scores is not None]
    columns = lead.columns  # no call scored, or one: that call's columns
    if len(runs) >= 2:
        try:
            columns = judgments.scored(genre, median_scores(runs),
                                       lead.columns.get("analysis"))
        except ValueError as exc:  # medians of valid scores are valid: a rubric refused
            columns = invalid_columns(str(exc), lead.columns.get("analysis"))
    ranges = question_ranges(runs)
    return {**row, **columns, "repeat_reason": reason,
            "score_spread": spread([r.total for r in scored if r.total is not None]),
            "question_ranges": None if ranges is None else JSON.encode(ranges),
            "repeat_calls": JSON.encode([repeat_record(
                i, r.columns["status"], r.result.key, r.total, r.columns.get("error"))
                for i, r in enumerate(reads)])}


def _genre_columns(essay: dict[str, Any], outcome: GenreOutcome | None) -> dict[str, Any]:
    """The row's genre columns: the prompt's genre, or the judge's answer (``outcome``)
    for an essay without one (null while no call was made: a skipped essay)."""
    if not needs_genre_call(essay["genre"]):
        return {"essay_genre": essay["genre"], "genre_source": SOURCE_PROMPT}
    allowed = JSON.encode(allowed_list(essay.get(ALLOWED_COLUMN)))
    if outcome is None:
        return {"allowed_genres": allowed}
    return {"genre": outcome.genre, "essay_genre": outcome.genre,
            "genre_source": SOURCE_JUDGE, "allowed_genres": allowed,
            "genre_call_key": outcome.result.key, "genre_call_status": outcome.status}


def judgments_table(essays: pl.DataFrame, requests: Sequence[ChatRequest],
                    results: Sequence[ChatResult], rubric: Scoring,
                    params: JudgeParams,
                    genres: Mapping[tuple[str, str], GenreOutcome] | None = None
                    ) -> pl.DataFrame:
    """One row per (essay, judge), in essay order then judge order; an essay judged
    several times (``repeats``) is one row made from all its calls. ``genres``: the genre
    calls' outcomes of the essays without a genre (bench/judge/genre.py); a failed one
    makes the row a failure with the genre call's status."""
    genres = genres or {}
    check_essays(essays)
    if len(requests) != len(results):
        raise ValueError(f"{len(requests)} requests but {len(results)} results")
    by_call: dict[tuple[str, str], list[tuple[int, ChatResult]]] = {}
    for req, res in zip(requests, results, strict=True):
        by_call.setdefault((req.model, req.tag), []).append((req.sample_index, res))
    rows: list[dict[str, Any]] = []
    renderer = make_renderer(params, rubric)
    judgments = JudgmentReader(rubric, renderer, PREFETCHED_READS,
                               request_scope(params, rubric, renderer))
    # The same for every row (and the fingerprint is a pydantic private attribute, slow to
    # read 10k times).
    common = {"rubric_id": rubric.id, "rubric_fingerprint": rubric.fingerprint,
              "mode": params.mode}
    wanted = [*ESSAY_COLUMNS, *(c for c in (ESSAY_ERROR_COLUMN, "off_language",
                                            ALLOWED_COLUMN) if c in essays.columns)]
    for essay in essays.select(wanted).iter_rows(named=True):
        tag = essay_tag(essay["prompt_id"], essay["model"], int(essay["sample_index"]))
        for judge in params.judges:
            outcome = genres.get((judge, tag)) if essay["status"] == CallStatus.OK.value \
                else None
            base: dict[str, Any] = {
                **{c: essay[c] for c in (*ESSAY_KEY_COLUMNS, "genre", "prompt_set")},
                "judge": judge, **common, **_genre_columns(essay, outcome)}
            if essay["status"] != CallStatus.OK.value:
                why = essay.get(ESSAY_ERROR_COLUMN)
                rows.append({**base, "status": CallStatus.SKIPPED.value,
                             "error_kind": f"essay_{essay['status']}",
                             "error": f"essay status {essay['status']}"
                                      + (f": {why}" if why else "")})
                continue
            if skipped_off_language(params, essay):
                rows.append({**base, "status": CallStatus.SKIPPED.value,
                             "error_kind": "essay_off_language",
                             "error": "essay not written in Chinese (off_language); "
                                      "judge.skip_off_language"})
                continue
            if skipped_off_topic(params, essay):
                rows.append({**base, "status": CallStatus.SKIPPED.value,
                             "error_kind": "essay_off_topic",
                             "error": "essay shares too few of its prompt's topic words "
                                      "(off topic); judge.skip_off_topic_below"})
                continue
            if needs_genre_call(essay["genre"]):
                if outcome is None:
                    raise ValueError(f"no genre call for judge {judge!r} on essay {tag}")
                if outcome.genre is None:  # no genre, no rubric: a failed judgment
                    rows.append({**base, **genre_failure(outcome)})
                    continue
            genre = str(base["genre"])
            calls = dict(by_call.get((judge, tag), ()))
            if 0 not in calls:
                raise ValueError(f"no result for judge {judge!r} on essay {tag}")
            nonce = renderer.expected_nonce(genre, essay["prompt_text"], essay["essay_text"])
            rows.append(_judged_row(base, [calls[r] for r in sorted(calls)], judgments,
                                    genre, params.repeat_when, nonce))
    for row in rows:
        row["decision"] = (Decision.KEPT.value if row["status"] == CallStatus.OK.value
                           else row["status"])
    return pl.DataFrame(rows, schema=JUDGMENT_SCHEMA, orient="row") if rows else \
        pl.DataFrame(schema=JUDGMENT_SCHEMA)


def genre_call_summary(genres: Mapping[tuple[str, str], GenreOutcome]
                       ) -> dict[str, Any]:
    """The genre calls of a judge run: how many, by status, and the genres answered."""
    return {"calls": len(genres),
            "from_ledger": sum(o.result.from_ledger for o in genres.values()),
            "status": dict(Counter(o.status for o in genres.values())),
            "genres": dict(Counter(o.genre for o in genres.values() if o.genre is not None))}


def status_counts(table: pl.DataFrame) -> dict[str, dict[str, int]]:
    """judge → status → rows."""
    counts: dict[str, Counter[str]] = {}
    for judge, status in table.select("judge", "status").iter_rows():
        counts.setdefault(str(judge), Counter())[str(status)] += 1
    return {judge: dict(c) for judge, c in counts.items()}


def borderline_requests(table: pl.DataFrame, requests: Sequence[ChatRequest],
                        params: JudgeParams, score: str) -> list[ChatRequest]:
    """The repeats of the essays in borderline cells (module ``repeats``), from the first
    calls' table and requests."""
    cells = borderline_cells(table, score, params.borderline_margin)
    if not cells:
        return []
    wanted = {(str(r["judge"]), essay_tag(r["prompt_id"], r["model"], int(r["sample_index"])))
              for r in table.iter_rows(named=True)
              if r["status"] != CallStatus.SKIPPED.value
              and (r["judge"], r["model"], r["genre"], r["prompt_set"]) in cells}
    return [call for first in requests
            if first.sample_index == 0 and (first.model, first.tag) in wanted
            for call in repeat_requests(first, params.repeats)]


def run_judge(essays: pl.DataFrame, params: JudgeParams, session: Runner) -> StageOutput:
    """Judge every ok essay with every judge (k times where ``repeats`` says so); the
    session's ledger makes reruns free."""
    rubric = load_scoring(params)
    # Essays whose prompt left the genre open: each judge says which genre the essay chose
    # first (its own ledgered call), then scores it with that genre's rubric.
    genre_calls = build_genre_calls(essays, params, rubric)
    genre_results = session.run([c.request for c in genre_calls.values()]) \
        if genre_calls else []
    genres = resolve_genres(genre_calls, genre_results)
    requests = build_judge_requests(essays, params, rubric, genres)
    results = session.run(requests) if requests else []
    repeated: list[ChatRequest] = []
    if params.repeats > 1 and params.repeat_when == "borderline" and requests:
        first = judgments_table(essays, requests, results, rubric, params, genres)
        repeated = borderline_requests(first, requests, params, JudgmentReader(rubric).main)
        if repeated:
            results = [*results, *session.run(repeated)]
            requests = [*requests, *repeated]
    table = judgments_table(essays, requests, results, rubric, params, genres)
    calls = {judge: c.model_dump() for judge, c in call_counts(table, "judge").items()}
    return StageOutput(table, run_meta={"calls": calls}, meta={
        "counts": status_counts(table), "calls": calls, "mode": params.mode,
        "rubric_id": rubric.id,
        "rubric_fingerprint": rubric.fingerprint,
        "rubric_path": str(Path(params.rubric_path)) if params.rubric_path else None,
        "requests": len(requests),
        "from_ledger": sum(r.from_ledger for r in results),
        "genre_calls": genre_call_summary(genres),
        "repeats": {"k": params.repeats, "when": params.repeat_when,
                    "margin": params.borderline_margin,
                    "essays": int((table["repeats"].fill_null(1) > 1).sum()),
                    "calls": sum(r.sample_index > 0 for r in requests)}})
