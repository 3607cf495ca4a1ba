"""Classify stage: genre and Open-Ended / Constrained set of every prompt.

Order of authority, lowest first: rules, then (mode ``rules+llm``) the labeler
for what the rules left open, then the manual override file. Each label keeps
its source (``rule``, ``llm``, ``manual``) and evidence.

Genre rules (``genre_rules``): the prompt is split into material, task and
requirements (``prompt_parts``); the genre is read from the task and requirements,
material counts only as weak evidence. A prompt may leave the genre open (文体不限:
``allowed_genres`` ``["any"]``, ``genre_open``) or offer a choice ("写一篇议论文或记叙文":
``allowed_genres`` lists them); ``genre`` is then null. Such a prompt is kept with
``keep_genre_choice`` (the default: generation and judging pick the rubric of the genre
the essay chose); with it off it is unclassified with reason ``genre_open`` or
``genre_multi`` and waits for an override like any undecided prompt. A prompt whose
task asks for a non-essay product (写一封感谢信, 写一段点评) is unclassified with reason
``genre_not_essay``; the labeler is not asked to find a genre for it. Every row records
the deciding evidence's span (``genre_span``, the passage itself) and its segment
(``genre_segment``: task, requirements or material).

Labels: ``genre`` is the single decided genre or null; ``allowed_genres`` is a list:
``[genre]`` for a decided genre, several genres for a choice, ``["any"]`` for an open
genre, ``[]`` when undecided. What a labeller's answer may change is
:mod:`essaybench.curate.classify_row`'s business: it first says whether the request is an
essay at all (``not_essay``: unclassified with reason ``llm_not_essay``; ``unsure``:
``llm_unsure``), and its genre counts only with evidence from the task or requirements on
a prompt that carries an essay-task cue. A reviewer's ``not_essay`` removes a prompt
(``reviewed_not_essay``); ``allowed_genres`` records an open genre or a choice.

Set rules: a binding constraint (essaybench.constraints) makes the prompt
constrained. Otherwise it is open, except in ``rules+llm`` mode for a prompt
longer than ``open_rule_max_chars``: long requests state requirements in free
words the rules miss, so the labeler is asked.

A prompt whose genre (or set) is still unknown is ``unclassified`` and waits for
an override; a labeler failure never becomes a label.

``run_classify`` drives the labeler with ``asyncio.run`` and so must not be
called from a running event loop; async callers use ``arun_classify``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from essaybench.constraints import binding, constraints_json, extract_constraints
from essaybench.core.contracts import Decision, StageOutput, ensure_columns
from essaybench.curate.classify_row import (
    ClassifyRow,
    apply_llm,
    apply_override,
    set_fallback,
)
from essaybench.curate.genre_rules import genre_by_rules
from essaybench.curate.labeler import (
    BatchLabeler,
    EssayAnswer,
    LabelRequest,
    LabelResult,
    LabelStatus,
    PromptLabeler,
    PromptSetLabel,
)
from essaybench.curate.overrides import OverrideEntry, load_overrides, unused_overrides
from essaybench.curate.promptset import genre_set_counts
from essaybench.curate.table import CLASSIFY_COLUMNS

log = logging.getLogger(__name__)


class ClassifyParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["rules", "rules+llm"] = Field(
        default="rules",
        description="rules only, or rules then the LLM labeler for what rules left open.")
    overrides_path: str | None = Field(
        default=None, description="Manual-review override file (YAML); None for no overrides.")
    llm_model: str | None = Field(
        default=None, description="rules+llm: registry name of the labelling model.")
    llm_concurrency: int = Field(
        default=8, ge=1, le=256, description="Labeler calls in flight at once (a batch "
        "labeler, like the gateway's, is bounded by the model's registry limits instead).")
    keep_genre_choice: bool = Field(
        default=True,
        description="Keep prompts that leave the genre open or offer a choice (genre null, "
        "allowed_genres set; the judge asks each essay's genre); off: they are "
        "unclassified (genre_open / genre_multi) and wait for an override.")
    open_rule_max_chars: int | None = Field(
        default=100, ge=1,
        description="rules+llm: longest prompt without a found constraint that rules call "
        "open; longer ones go to the labeler (None: rules call every such prompt open).")


# --- the stage --------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    rows: list[ClassifyRow]
    requests: list[LabelRequest]
    overrides: dict[str, OverrideEntry]


def _rule_row(prompt_id: str, text: str, params: ClassifyParams) -> ClassifyRow:
    found = extract_constraints(text)
    bound = binding(found)
    rule = genre_by_rules(text)
    if bound:
        pset: str | None = PromptSetLabel.CONSTRAINED.value
        set_evidence = "rule: " + "; ".join(f"{c.kind}:{c.evidence}" for c in bound)
    elif (params.mode == "rules+llm" and params.open_rule_max_chars is not None
          and len(text) > params.open_rule_max_chars):
        pset, set_evidence = None, (f"rule: undecided, no constraint found in a prompt longer "
                                    f"than {params.open_rule_max_chars} characters")
    else:
        pset = PromptSetLabel.OPEN.value
        # what was found is exam boilerplate or a given title: show it, it did not count
        ignored = [f"{c.kind}:{c.evidence}" for c in found]
        set_evidence = "rule: no constraint found" + (
            f" (not binding: {'; '.join(ignored)})" if ignored else "")
    return ClassifyRow(prompt_id, text, rule.genre.value if rule.genre else None,
                       "rule" if rule.decided else None, rule.evidence, pset,
                       "rule" if pset else None, set_evidence, constraints_json(found),
                       frozenset(c.kind for c in bound), rule.allowed, rule.open_genre,
                       rule.segment, text[rule.span[0]:rule.span[1]] if rule.span else None, rule,
                       set_deferred=pset is None)


def _plan(table: pl.DataFrame, params: ClassifyParams,
          labeler: PromptLabeler | None) -> _Plan:
    missing = {"prompt_id", "text"} - set(table.columns)
    if missing:
        raise ValueError(f"classify needs the columns {sorted(missing)} (added by filter)")
    if params.mode == "rules+llm" and labeler is None:
        raise ValueError("classify mode 'rules+llm' needs a labeler")
    overrides = load_overrides(params.overrides_path) if params.overrides_path else {}
    rows = [_rule_row(pid, text or "", params)
            for pid, text in zip(table["prompt_id"], table["text"], strict=True)]
    requests: dict[str, LabelRequest] = {}
    if params.mode == "rules+llm":
        for row in rows:
            need_genre = row.genre is None and not (row.genre_choice or row.not_essay)
            if (need_genre or row.prompt_set is None) and row.prompt_id not in requests:
                requests[row.prompt_id] = LabelRequest(
                    prompt_id=row.prompt_id, text=row.text, need_genre=need_genre,
                    need_set=row.prompt_set is None, need_essay=need_genre)
    return _Plan(rows, list(requests.values()), overrides)


async def _label_all(labeler: PromptLabeler, requests: list[LabelRequest],
                     concurrency: int) -> dict[str, LabelResult]:
    if isinstance(labeler, BatchLabeler):
        # One batch: the gateway's per-endpoint limits bound the calls, not llm_concurrency.
        try:
            batch = await labeler.label_many(requests)
        except Exception as exc:  # a crashing client is a failed call, not a failed stage
            failure = LabelResult.failure(LabelStatus.API_ERROR, f"{type(exc).__name__}: {exc}")
            batch = [failure] * len(requests)
        return {r.prompt_id: res for r, res in zip(requests, batch, strict=True)}
    gate = asyncio.Semaphore(concurrency)

    async def one(request: LabelRequest) -> LabelResult:
        async with gate:
            try:
                return await labeler.label(request)
            except Exception as exc:  # a crashing client is a failed call, not a failed stage
                return LabelResult.failure(LabelStatus.API_ERROR, f"{type(exc).__name__}: {exc}")

    results = await asyncio.gather(*(one(r) for r in requests))
    return {r.prompt_id: res for r, res in zip(requests, results, strict=True)}


def run_classify(table: pl.DataFrame, params: ClassifyParams,
                 labeler: PromptLabeler | None = None) -> StageOutput:
    plan = _plan(table, params, labeler)
    results: dict[str, LabelResult] = {}
    if plan.requests and labeler is not None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            results = asyncio.run(_label_all(labeler, plan.requests, params.llm_concurrency))
        else:
            raise RuntimeError("run_classify was called inside a running event loop; "
                               "await arun_classify(...) instead")
    return _finish(table, params, plan, results)


async def arun_classify(table: pl.DataFrame, params: ClassifyParams,
                        labeler: PromptLabeler | None = None) -> StageOutput:
    plan = _plan(table, params, labeler)
    results: dict[str, LabelResult] = {}
    if plan.requests and labeler is not None:
        results = await _label_all(labeler, plan.requests, params.llm_concurrency)
    return _finish(table, params, plan, results)


def _decide(row: ClassifyRow, params: ClassifyParams) -> tuple[str, str | None, str]:
    if row.removed is not None:
        return (Decision.UNCLASSIFIED.value, "reviewed_not_essay",
                f"removed by review, not an essay: {row.removed} ({row.genre_evidence})")
    choice = row.genre_choice and params.keep_genre_choice
    if (row.genre is not None or choice) and row.prompt_set is not None:
        genre = row.genre or f"one of {', '.join(row.allowed)}"
        return (Decision.KEPT.value, None,
                f"genre {genre} ({row.genre_source}); set {row.prompt_set} ({row.set_source})")
    example = "genre: <argumentative|narrative|descriptive|expository>"
    if row.genre_choice:
        reason = "genre_open" if row.genre_open else "genre_multi"
        missing = ("genre open to the writer" if row.genre_open
                   else f"genre a choice of {', '.join(row.allowed)}")
        missing += " (kept only with keep_genre_choice)"
        evidence = row.genre_evidence
    elif row.not_essay:
        reason, evidence = "genre_not_essay", row.genre_evidence
        missing = "no genre: the task asks for something other than an essay"
    elif row.genre is None and row.llm_verdict is EssayAnswer.NOT_ESSAY:
        reason, evidence = "llm_not_essay", row.genre_evidence
        missing = "the labeller says the request asks for no essay (not published)"
        example = "not_essay: true, note: <why>} or {genre: <...>"
    elif row.genre is None and row.llm_verdict is EssayAnswer.UNSURE:
        reason, evidence = "llm_unsure", row.genre_evidence
        missing = "the labeller cannot tell whether the request asks for an essay"
    elif row.genre is None:
        reason, missing, evidence = "genre_undecided", "genre undecided", row.genre_evidence
    else:
        reason, missing, evidence = "set_undecided", "set undecided", row.set_evidence
        example = "prompt_set: <open|constrained>"
    where = (params.overrides_path
             or "an override file (e.g. data/overrides.yaml, set as overrides_path)")
    llm = f"; {row.llm_note}" if row.llm_note else ""
    return (Decision.UNCLASSIFIED.value, reason,
            f"{missing} ({evidence}{llm}); to resolve, add to {where} under "
            f"overrides: '{row.prompt_id}: {{{example}}}'")


def _finish(table: pl.DataFrame, params: ClassifyParams, plan: _Plan,
            results: dict[str, LabelResult]) -> StageOutput:
    incomplete = 0
    for row in plan.rows:
        incomplete += not apply_llm(row, results.get(row.prompt_id))
        set_fallback(row)
        if row.prompt_id in plan.overrides:
            apply_override(row, plan.overrides[row.prompt_id])
    decisions = [_decide(row, params) for row in plan.rows]
    columns: dict[str, list[Any]] = {
        name: [getattr(row, name) for row in plan.rows] for name in CLASSIFY_COLUMNS}
    columns["decision"] = [d[0] for d in decisions]
    columns["reason"] = [d[1] for d in decisions]
    columns["detail"] = [d[2] for d in decisions]
    out = ensure_columns(table, CLASSIFY_COLUMNS).with_columns(
        pl.Series(name, values, dtype=CLASSIFY_COLUMNS.get(name, pl.Utf8))
        for name, values in columns.items())
    unused = unused_overrides(plan.overrides, (row.prompt_id for row in plan.rows))
    if unused:
        log.warning("classify: %d override(s) match no prompt: %s", len(unused), ", ".join(unused))
    kept = [r for r, d in zip(plan.rows, decisions, strict=True) if d[0] == Decision.KEPT.value]
    kept_labels = pl.DataFrame({"genre": [r.genre for r in kept],
                                "prompt_set": [r.prompt_set for r in kept]},
                               schema={"genre": pl.Utf8, "prompt_set": pl.Utf8})
    meta = {
        "params": params.model_dump(mode="json"),
        "counts": genre_set_counts(kept_labels),
        "unclassified": dict(Counter(d[1] for d in decisions if d[1] is not None)),
        "label_sources": {
            "genre": dict(Counter(r.genre_source or "none" for r in plan.rows)),
            "set": dict(Counter(r.set_source or "none" for r in plan.rows)),
        },
        "llm": {"requests": len(plan.requests),
                "status": dict(Counter(r.status.value for r in results.values())),
                "incomplete": incomplete},
        "genre_choice": {"open": sum(r.genre_choice and r.genre_open for r in plan.rows),
                         "multi": sum(r.genre_choice and not r.genre_open for r in plan.rows),
                         "kept": params.keep_genre_choice},
        "genre_segments": dict(Counter(r.genre_segment or "none" for r in plan.rows)),
        "constraint_kinds": dict(Counter(k for r in plan.rows for k in sorted(r.binding_kinds))),
        "overrides": {"path": params.overrides_path, "entries": len(plan.overrides),
                      "applied": sum(r.prompt_id in plan.overrides for r in plan.rows)},
        "unused_overrides": unused,
    }
    return StageOutput(out, meta)
