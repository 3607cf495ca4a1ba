"""The drill-down: every essay of the run under its prompt, with its judgments. Pure.

A prompt shows its length requirement (the one compliance is checked against) and the
constraints that bind the writer (``essaybench.constraints``: the rules that decide
Open-Ended / Constrained).

Failed essays and judgments are rows like the others (their status and error shown), so
a filter on status lists them rather than a table hiding them. An essay's ``row_status``
is what the status filter matches: the essay's own status when it did not come back ok,
else ``judge <status>`` of its first judgment that did not, else ``ok``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple

import polars as pl

from essaybench.bench.compliance import compliance_table
from essaybench.constraints.extract import binding, extract_constraints
from essaybench.core.contracts import GENRES, OK, PROMPT_SETS
from essaybench.report.labels import Labels

ESSAY_KEYS = ("prompt_id", "model", "sample_index")


class TraitScores(NamedTuple):
    """One trait's sub-question scores in a judgment (a tuple: 10,920 judgments make ~55k;
    a frozen dataclass was most of the drill-down's time at the paper's scale)."""

    trait: str
    scores: list[tuple[str, str]]  # (sub-question id, score)


@dataclass(frozen=True)
class JudgmentView:
    judge: str
    status: str
    score_weighted: float | None
    score_unweighted: float | None
    analysis: str | None
    error: str | None
    traits: list[TraitScores]
    flags: list[str]
    # The genre scored and who decided it: "prompt", or "judge" (the essay's choice,
    # for a prompt that left the genre open or offered a choice)
    essay_genre: str | None = None
    genre_source: str | None = None
    # judge.second_judge's opinion on a flagged judgment, beside this one (second.py)
    second_judge: str | None = None
    second_status: str | None = None
    second_score: float | None = None
    second_error: str | None = None


@dataclass(frozen=True)
class EssayView:
    model: str
    sample_index: int
    status: str
    row_status: str
    error: str | None
    text: str | None
    grid_chars: int | None
    chinese_chars: int | None
    verdict: str | None
    deviation: float | None
    off_language: bool | None
    finish_reason: str | None
    latency_s: float | None
    cost_usd: float | None
    judgments: list[JudgmentView]


@dataclass(frozen=True)
class PromptView:
    prompt_id: str
    genre: str
    genre_zh: str | None
    prompt_set: str
    text: str
    requirement: str
    constraints: list[tuple[str, str]]  # (kind, the prompt's words) that bind the writer
    essays: list[EssayView]
    allowed_genres: str | None = None  # an open or multi-genre prompt's choice, as shown


def requirement_text(lo: int | None, hi: int | None, approx: int | None) -> str:
    """A prompt's length requirement in grid characters, as a reader writes it."""
    if approx is not None:
        return f"about {approx} characters"
    if lo is not None and hi is not None:
        return f"{lo}–{hi} characters"
    if lo is not None:
        return f"at least {lo} characters"
    if hi is not None:
        return f"at most {hi} characters"
    return "no length requirement"


TraitPlan = list[tuple[str, list[tuple[int, str]]]]  # (trait label, [(key index, question)])


def _trait_plan(keys: tuple[str, ...], labels: Labels) -> TraitPlan:
    """How a judgment's score keys (``trait.question``) group into traits, in key order."""
    by_trait: dict[str, list[tuple[int, str]]] = {}
    for i, qid in enumerate(keys):
        trait, _, question = qid.rpartition(".")
        by_trait.setdefault(trait, []).append((i, question or qid))
    return [(labels.trait(t) if t else "", qs) for t, qs in by_trait.items()]


def _traits(scores_json: str | None, labels: Labels,
            plans: dict[tuple[str, ...], TraitPlan]) -> list[TraitScores]:
    """A judgment's scores by trait; ``plans`` keeps each key set's grouping (one per rubric,
    so 10,920 judgments are grouped a handful of times, not once each)."""
    scores: dict[str, Any] = json.loads(scores_json) if scores_json else {}
    keys = tuple(scores)
    plan = plans.get(keys)
    if plan is None:
        plan = plans[keys] = _trait_plan(keys, labels)
    values = [str(v) for v in scores.values()]
    return [TraitScores(name, [(q, values[i]) for i, q in qs]) for name, qs in plan]


def _flags(*lists: str | None) -> list[str]:
    found: list[str] = []
    for raw in lists:
        for flag in json.loads(raw) if raw else []:
            if str(flag) not in found:
                found.append(str(flag))
    return found


def _judgments(judgments: pl.DataFrame, labels: Labels) -> dict[tuple[Any, ...],
                                                                 list[JudgmentView]]:
    out: dict[tuple[Any, ...], list[JudgmentView]] = {}
    plans: dict[tuple[str, ...], TraitPlan] = {}
    for r in judgments.sort("judge").iter_rows(named=True):
        view = JudgmentView(str(r["judge"]), str(r["status"]), r.get("score_weighted"),
                            r.get("score_unweighted"), r.get("analysis"), r.get("error"),
                            _traits(r.get("scores"), labels, plans),
                            _flags(r.get("essay_flags"), r.get("judgment_flags")),
                            r.get("essay_genre"), r.get("genre_source"),
                            r.get("second_judge"), r.get("second_status"),
                            r.get("second_score"), r.get("second_error"))
        out.setdefault(tuple(r[k] for k in ESSAY_KEYS), []).append(view)
    return out


CHOICE = "choice"  # the drill-down's genre of a prompt that leaves it to the essay


def _allowed_text(allowed: Any) -> str:
    names = [str(g) for g in allowed] if allowed is not None else []
    if not names or "any" in names:
        return "any genre (文体不限)"
    return " or ".join(names)


def _row_status(status: str, judged: list[JudgmentView]) -> str:
    if status != OK:
        return status
    failed = next((j.status for j in judged if j.status != OK), None)
    return f"judge {failed}" if failed else OK


def _sort_key(genre: str, prompt_set: str, prompt_id: str) -> tuple[int, int, str, str]:
    g = GENRES.index(genre) if genre in GENRES else len(GENRES)
    s = PROMPT_SETS.index(prompt_set) if prompt_set in PROMPT_SETS else len(PROMPT_SETS)
    return g, s, genre, prompt_id


def drilldown(essays: pl.DataFrame, judgments: pl.DataFrame, labels: Labels,
              checked: pl.DataFrame | None = None) -> list[PromptView]:
    """Every prompt of the run with each model's essays and their judgments; ``checked``:
    ``compliance_table(essays, prompt_column="prompt_text")`` if the caller has it."""
    if checked is None:
        checked = compliance_table(essays, prompt_column="prompt_text")
    judged = _judgments(judgments, labels)
    prompts: dict[str, PromptView] = {}
    for r in checked.sort("model", "sample_index").iter_rows(named=True):
        pid = str(r["prompt_id"])
        if pid not in prompts:
            pset, text = str(r["prompt_set"]), str(r["prompt_text"] or "")
            # A prompt without a genre leaves it to the essay: listed as "choice", with
            # what it allows (each judgment shows the genre the judge saw chosen).
            genre = CHOICE if r["genre"] is None else str(r["genre"])
            prompts[pid] = PromptView(
                pid, genre, labels.genre_zh(genre), pset, text,
                requirement_text(r["req_min_chars"], r["req_max_chars"], r["req_approx_chars"]),
                [(c.kind, c.evidence) for c in binding(extract_constraints(text))], [],
                _allowed_text(r.get("allowed_genres")) if r["genre"] is None else None)
        views = judged.get(tuple(r[k] for k in ESSAY_KEYS), [])
        prompts[pid].essays.append(EssayView(
            model=str(r["model"]), sample_index=int(r["sample_index"] or 0),
            status=str(r["status"]), row_status=_row_status(str(r["status"]), views),
            error=r.get("error"), text=r["essay_text"], grid_chars=r["essay_grid_chars"],
            chinese_chars=r["essay_chars"], verdict=r["length_verdict"],
            deviation=r["length_deviation"], off_language=r.get("off_language"),
            finish_reason=r.get("finish_reason"), latency_s=r.get("latency_s"),
            cost_usd=r.get("cost_usd"), judgments=views))
    return sorted(prompts.values(), key=lambda p: _sort_key(p.genre, p.prompt_set, p.prompt_id))
