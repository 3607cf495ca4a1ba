"""The pairwise stage's calls: two essays for the same prompt, judged twice with the
order swapped.

Each sent pair is two requests per judge, order ``AB`` and ``BA``; their tags and
seeds derive from a content hash of the pair (:mod:`.design`), so a rerun asks for
exactly the same calls and the gateway's ledger serves the finished ones. See
:mod:`.tables` for the tables and how the two orders are merged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from essaybench.bench.judge.judgments import status_counts
from essaybench.bench.judge.request import Runner
from essaybench.bench.pairwise.design import STAGE, Pair, PairwiseParams, build_pairs, call_seed
from essaybench.bench.pairwise.prompt import (
    VERDICTS,
    PairwisePrompt,
    load_pairwise_prompt,
    pairwise_answer_schema,
    render_pairwise_messages,
)
from essaybench.bench.pairwise.tables import (
    ORDERS,
    Order,
    calls_frame,
    merge_calls,
    model_verdict,
    position_bias,
)
from essaybench.bench.rubrics import Rubric, load_rubric
from essaybench.core.contracts import StageOutput
from essaybench.llm.structured import StructuredError, reply_object, reply_of
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message


def build_pairwise_requests(pairs: Sequence[Pair], params: PairwiseParams, rubric: Rubric,
                            prompt: PairwisePrompt) -> list[ChatRequest]:
    """Per sendable pair: order AB then BA, each for every judge."""
    schema = pairwise_answer_schema(params.analysis_max_chars)
    requests: list[ChatRequest] = []
    for pair in pairs:
        if pair.skip_reason is not None:
            continue
        for order in ORDERS:
            first, second = pair.shown(order)
            messages = render_pairwise_messages(rubric, pair.genre, pair.prompt_text, first,
                                                second, params.analysis_max_chars, prompt)
            call = {"temperature": params.temperature, "max_tokens": params.max_tokens,
                    "seed": call_seed(params.seed, pair.pair_id, order)}
            for judge in params.judges:
                requests.append(ChatRequest(
                    model=judge, messages=tuple(Message.model_validate(m) for m in messages),
                    params=call, response_schema=schema, stage=STAGE, tag=pair.tag(order)))
    return requests


class VerdictError(ValueError):
    """A reply that is not a valid pairwise verdict."""


def parse_verdict(parsed_or_text: Any) -> tuple[str, str | None]:
    """(position verdict, analysis) of a reply — its raw text exactly one JSON object
    (``llm.structured.reply_object``); raises :class:`VerdictError`."""
    try:
        value = reply_object(parsed_or_text)
    except StructuredError as exc:
        raise VerdictError(str(exc)) from exc
    verdict = value.get("verdict")
    if not isinstance(verdict, str) or verdict not in VERDICTS:
        raise VerdictError(f"verdict must be one of {list(VERDICTS)}, got {verdict!r}")
    analysis = value.get("analysis")
    return verdict, analysis if isinstance(analysis, str) else None


def _call_row(base: dict[str, Any], order: Order, result: ChatResult) -> dict[str, Any]:
    row = {**base, "judge_returned_model": result.returned_model, "raw_reply": result.text,
           "from_ledger": result.from_ledger, "call_key": result.key}
    if result.status is not CallStatus.OK:
        return {**row, "status": result.status.value, "error": result.error}
    try:
        position, analysis = parse_verdict(reply_of(result.text, result.parsed))
    except VerdictError as exc:
        return {**row, "status": CallStatus.PARSE_ERROR.value, "error": str(exc)}
    return {**row, "status": CallStatus.OK.value, "analysis": analysis,
            "position_verdict": position, "verdict": model_verdict(position, order)}


def calls_table(pairs: Sequence[Pair], requests: Sequence[ChatRequest],
                results: Sequence[ChatResult], params: PairwiseParams, rubric: Rubric,
                prompt: PairwisePrompt) -> pl.DataFrame:
    """One row per (pair, judge, order); a skipped pair has its two rows, nothing sent."""
    if len(requests) != len(results):
        raise ValueError(f"{len(requests)} requests but {len(results)} results")
    by_call = {(req.model, req.tag): res for req, res in zip(requests, results, strict=True)}
    rows: list[dict[str, Any]] = []
    for pair in pairs:
        for judge in params.judges:
            for order in ORDERS:
                base: dict[str, Any] = {
                    "judge": judge, "prompt_id": pair.prompt_id,
                    "sample_index": pair.sample_index, "model_a": pair.model_a,
                    "model_b": pair.model_b, "genre": pair.genre,
                    "prompt_set": pair.prompt_set, "pair_id": pair.pair_id,
                    "rubric_id": rubric.id, "rubric_fingerprint": rubric.fingerprint,
                    "template_id": prompt.id, "template_fingerprint": prompt.fingerprint,
                    "order": order,
                    "first_model": pair.model_a if order == "AB" else pair.model_b}
                if pair.skip_reason is not None:
                    rows.append({**base, "status": CallStatus.SKIPPED.value,
                                 "error": pair.skip_reason})
                    continue
                result = by_call.get((judge, pair.tag(order)))
                if result is None:
                    raise ValueError(f"no result for judge {judge!r} on {pair.tag(order)}")
                rows.append(_call_row(base, order, result))
    return calls_frame(rows)


@dataclass(frozen=True)
class PairwiseRun:
    pairs: list[Pair]
    requests: list[ChatRequest]
    calls: pl.DataFrame
    merged: pl.DataFrame
    rubric: Rubric
    prompt: PairwisePrompt


def judge_pairs(essays: pl.DataFrame, params: PairwiseParams, session: Runner) -> PairwiseRun:
    """Build the pairs, send both orders to every judge, and tabulate the replies."""
    rubric = load_rubric(params.rubric_path)
    prompt = load_pairwise_prompt(params.prompt_path)
    pairs = build_pairs(essays, params)
    requests = build_pairwise_requests(pairs, params, rubric, prompt)
    results = session.run(requests) if requests else []
    calls = calls_table(pairs, requests, results, params, rubric, prompt)
    return PairwiseRun(pairs, requests, calls, merge_calls(calls), rubric, prompt)


def run_pairwise(essays: pl.DataFrame, params: PairwiseParams, session: Runner) -> StageOutput:
    """The stage's output: the merged table (both orders' details in per-order columns)."""
    run = judge_pairs(essays, params, session)
    return StageOutput(run.merged, meta={
        "counts": status_counts(run.merged), "design": params.design,
        "baseline": params.baseline, "pairs": len(run.pairs),
        "requests": len(run.requests),
        "from_ledger": int(run.calls["from_ledger"].fill_null(False).sum()),
        "rubric_id": run.rubric.id, "rubric_fingerprint": run.rubric.fingerprint,
        "template_id": run.prompt.id, "template_fingerprint": run.prompt.fingerprint,
        "position_bias": position_bias(run.merged).to_dicts()})
