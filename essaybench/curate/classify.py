"""Classify stage: genre and Open-Ended / Constrained set of every prompt.

Order of authority, lowest first: rules, then (mode ``rules+llm``) the labeler
for what the rules left open, then the manual override file. Each label keeps
its source (``rule``, ``llm``, ``manual``) and evidence.

Genre rules: an explicit genre word (议论文, 记叙文, 描写文, 说明文 and a few
compounds such as 写景散文, 科普文章, 驳论文) decides, unless negated (不要写成
议论文, 除记叙文外) or contradicted by another genre word, which leaves the genre
undecided. Bare 散文 names a form, not one of the four genres, and decides
nothing. Without a genre word, cue groups are scored per genre (one point per
group present); a unique top score decides, a tie or no cue leaves the genre
undecided.

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
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from essaybench.constraints import binding, constraints_json, extract_constraints
from essaybench.core.contracts import Decision, StageOutput, ensure_columns
from essaybench.curate.labeler import (
    BatchLabeler,
    Genre,
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
    open_rule_max_chars: int | None = Field(
        default=100, ge=1,
        description="rules+llm: longest prompt without a found constraint that rules call "
        "open; longer ones go to the labeler (None: rules call every such prompt open).")


# --- genre rules ------------------------------------------------------------------

_EXPLICIT: dict[Genre, re.Pattern[str]] = {
    Genre.ARGUMENTATIVE: re.compile(r"议论文|议论性的?(?:文章|散文|短文)|驳论文|立论文|杂文|时评"),
    Genre.NARRATIVE: re.compile(r"记叙文|叙事散文|叙事文|记叙性的?(?:文章|散文|短文)"),
    Genre.DESCRIPTIVE: re.compile(
        r"描写文|写景(?:散文|作文|短文|文)|抒情散文|状物散文|描写性的?(?:文章|短文)"),
    Genre.EXPOSITORY: re.compile(
        r"说明文(?![字件])|说明性的?(?:文章|短文)|科普(?:说明)?(?:文章|短文|小品|文)"),
}
_NEGATED_BEFORE = re.compile(
    r"(?:不要|不得|不能|不可|不宜|切勿|别|禁止|避免|而非|不是)(?:写成|写作|写|采用|用)?(?:一篇)?$|除$")
_NEGATED_AFTER = re.compile(r"除外|以外")
_NOT_TECHNIQUE = "".join(f"(?<!{w})" for w in ("细节", "心理", "外貌", "动作", "语言", "神态",
                                                "肖像"))
_CUES: dict[Genre, tuple[str, ...]] = {
    Genre.ARGUMENTATIVE: (
        r"谈谈|说说|谈一谈", r"看法|观点|见解|主张|立场", r"辩证|思辨", r"启示|道理",
        r"评价|评论|点评|书评|影评", r"论述|论证|论点|论据|阐述|阐明", r"议论|议一议",
        r"辩论|辩题|驳斥|反驳", r"利弊|利与弊|利大于弊|弊大于利",
        r"怎么看|如何看待|怎样看待|是否", r"演讲稿|读后感|观后感|倡议", r"赞成|反对|认同|同意",
        r"思考|认识|理解", r"(?:^|[《“\"「：:\s])论(?![文语\s，。])"),
    Genre.NARRATIVE: (
        r"讲述|讲讲|叙述|记叙|记述|叙事", r"经历", r"故事", r"那一(?:刻|次|天|年|瞬间)",
        r"难忘|难以忘怀", r"成长", r"记一(?:次|件|个)|一件事", r"回忆|往事|童年|第一次",
        r"感动", r"传记|日记|童话|寓言|小说", r"发生"),
    Genre.DESCRIPTIVE: (
        rf"{_NOT_TECHNIQUE}描写(?!方法)", r"描绘|刻画", r"景色|景物|风景|风光|美景|景象|景致",
        r"写景|状物|即景", r"[春夏秋冬]天的|[春夏秋冬]日|四季", r"一角|角落",
        r"感官|视觉|听觉|嗅觉|触觉|味觉", r"色彩|画面|氛围|意境",
        r"月色|夜色|晚霞|朝霞|日出|日落|雪景|雨景|夜景", r"场面|场景", r"游记"),
    Genre.EXPOSITORY: (
        r"介绍", r"说明(?!理由|原因|你的)", r"原理|成因", r"科普|科学",
        r"是怎样|怎样(?:制作|做|形成|产生|工作)|如何(?:制作|形成|产生|使用|工作)|为什么会",
        r"制作方法|使用方法|做法|步骤", r"构造|功能|用途|种类|分类",
        r"指南|攻略|说明书"),
}
_CUE_RXS = {genre: [re.compile(c) for c in cues] for genre, cues in _CUES.items()}


@dataclass(frozen=True)
class RuleGenre:
    genre: Genre | None
    evidence: str


def genre_by_rules(text: str) -> RuleGenre:
    found: dict[Genre, list[str]] = {}
    negated: list[str] = []
    masked = text
    for genre, rx in _EXPLICIT.items():
        for m in rx.finditer(text):
            if (_NEGATED_BEFORE.search(text[max(0, m.start() - 6): m.start()])
                    or _NEGATED_AFTER.match(text, m.end())):
                negated.append(m[0])
            else:
                found.setdefault(genre, []).append(m[0])
            # a genre word must not also count as a cue (议论文 holds 议论, 说明文 holds 说明)
            masked = masked[: m.start()] + " " * len(m[0]) + masked[m.end():]
    note = f"; ignored negated {', '.join(negated)}" if negated else ""
    if len(found) == 1:
        genre, words = next(iter(found.items()))
        return RuleGenre(genre, f"rule:{words[0]}{note}")
    if found:
        listed = ", ".join(f"{w[0]} ({g.value})" for g, w in found.items())
        return RuleGenre(None, f"rule: undecided, conflicting genre words {listed}{note}")
    scores = {g: [hit[0] for rx in rxs if (hit := rx.search(masked))]
              for g, rxs in _CUE_RXS.items()}
    scored = sorted(((len(c), g) for g, c in scores.items() if c), key=lambda x: -x[0])
    detail = "; ".join(f"{g.value}={n} [{', '.join(scores[g])}]" for n, g in scored)
    if not scored:
        return RuleGenre(None, f"rule: undecided, no genre word or cue{note}")
    if len(scored) > 1 and scored[0][0] == scored[1][0]:
        return RuleGenre(None, f"rule: undecided, tied cues {detail}{note}")
    return RuleGenre(scored[0][1], f"rule cues: {detail}{note}")


# --- the stage --------------------------------------------------------------------


@dataclass
class _Row:
    prompt_id: str
    text: str
    genre: str | None
    genre_source: str | None
    genre_evidence: str
    prompt_set: str | None
    set_source: str | None
    set_evidence: str
    constraints: str
    binding_kinds: frozenset[str]
    llm_note: str = ""


@dataclass(frozen=True)
class _Plan:
    rows: list[_Row]
    requests: list[LabelRequest]
    overrides: dict[str, OverrideEntry]


def _rule_row(prompt_id: str, text: str, params: ClassifyParams) -> _Row:
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
    return _Row(prompt_id, text, rule.genre.value if rule.genre else None,
                "rule" if rule.genre else None, rule.evidence, pset,
                "rule" if pset else None, set_evidence, constraints_json(found),
                frozenset(c.kind for c in bound))


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
            if (row.genre is None or row.prompt_set is None) and row.prompt_id not in requests:
                requests[row.prompt_id] = LabelRequest(
                    prompt_id=row.prompt_id, text=row.text, need_genre=row.genre is None,
                    need_set=row.prompt_set is None)
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


def _apply_llm(row: _Row, result: LabelResult | None) -> bool:
    """Fill what the request asked for; False if the labeler left something asked unanswered."""
    if result is None:
        return True
    asked_genre, asked_set = row.genre is None, row.prompt_set is None
    if result.status != LabelStatus.OK:
        row.llm_note = f"llm {result.status.value}: {result.error or ''}".strip()
        return True
    if asked_genre and result.genre is not None:
        row.genre, row.genre_source = result.genre.value, "llm"
        row.genre_evidence = f"llm: {result.evidence} | {row.genre_evidence}"
    if asked_set and result.prompt_set is not None:
        row.prompt_set, row.set_source = result.prompt_set.value, "llm"
        row.set_evidence = f"llm: {result.evidence} | {row.set_evidence}"
    complete = row.genre is not None and row.prompt_set is not None
    if not complete:
        row.llm_note = "llm ok but did not give every label asked for"
    return complete


def _apply_override(row: _Row, entry: OverrideEntry) -> None:
    who = f"manual ({entry.reviewer})" if entry.reviewer else "manual"
    note = f": {entry.note}" if entry.note else ""
    if entry.genre is not None:
        was = f"{row.genre_source}:{row.genre}" if row.genre else "undecided"
        row.genre, row.genre_source = entry.genre.value, "manual"
        row.genre_evidence = f"{who}{note} | was {was}; {row.genre_evidence}"
    if entry.prompt_set is not None:
        was = f"{row.set_source}:{row.prompt_set}" if row.prompt_set else "undecided"
        row.prompt_set, row.set_source = entry.prompt_set.value, "manual"
        row.set_evidence = f"{who}{note} | was {was}; {row.set_evidence}"


def _decide(row: _Row, overrides_path: str | None) -> tuple[str, str | None, str]:
    if row.genre is not None and row.prompt_set is not None:
        return (Decision.KEPT.value, None,
                f"genre {row.genre} ({row.genre_source}); set {row.prompt_set} ({row.set_source})")
    missing, evidence, example = (
        ("genre", row.genre_evidence, "genre: <argumentative|narrative|descriptive|expository>")
        if row.genre is None else ("set", row.set_evidence, "prompt_set: <open|constrained>"))
    where = overrides_path or "an override file (e.g. data/overrides.yaml, set as overrides_path)"
    llm = f"; {row.llm_note}" if row.llm_note else ""
    return (Decision.UNCLASSIFIED.value, f"{missing}_undecided",
            f"{missing} undecided ({evidence}{llm}); to resolve, add to {where} under "
            f"overrides: '{row.prompt_id}: {{{example}}}'")


def _finish(table: pl.DataFrame, params: ClassifyParams, plan: _Plan,
            results: dict[str, LabelResult]) -> StageOutput:
    incomplete = 0
    for row in plan.rows:
        incomplete += not _apply_llm(row, results.get(row.prompt_id))
        if row.prompt_id in plan.overrides:
            _apply_override(row, plan.overrides[row.prompt_id])
    decisions = [_decide(row, params.overrides_path) for row in plan.rows]
    columns: dict[str, list[Any]] = {
        name: [getattr(row, name) for row in plan.rows] for name in CLASSIFY_COLUMNS}
    columns["decision"] = [d[0] for d in decisions]
    columns["reason"] = [d[1] for d in decisions]
    columns["detail"] = [d[2] for d in decisions]
    out = ensure_columns(table, CLASSIFY_COLUMNS).with_columns(
        pl.Series(name, values, dtype=pl.Utf8) for name, values in columns.items())
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
        "constraint_kinds": dict(Counter(k for r in plan.rows for k in sorted(r.binding_kinds))),
        "overrides": {"path": params.overrides_path, "entries": len(plan.overrides),
                      "applied": sum(r.prompt_id in plan.overrides for r in plan.rows)},
        "unused_overrides": unused,
    }
    return StageOutput(out, meta)
