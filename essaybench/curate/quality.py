"""Curation quality against a labelled evaluation set: filter + classify, measured.

The set (``data/eval/curation_eval.v1.jsonl``, see ``data/eval/README.md``) labels each
prompt: is it an essay request, its genre or allowed genres (a choice, or ``["any"]`` for
an open genre), Open/Constrained, and the body length it asks for. A second file labels
a sample of ``../shared/data/writingbench_zh_queries`` by line number only; its texts are
read from there (:func:`load_writingbench_labels`).

:func:`evaluate` runs the prompts through the real filter and classify stages and
:func:`quality_report` computes the figures ``benchmarks/curation_quality.py`` prints.
A prompt's *class* is its genre, ``multi`` (a choice of genres), ``open`` (genre left to
the writer) or ``non_essay``; the predicted class may also be ``undecided`` or
``dropped`` (the filter removed it). A prediction is *decided* when it is a genre, a
choice or an open genre; it is *correct* when its allowed genres equal the label's.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from essaybench.constraints import length_requirement
from essaybench.core.contracts import Decision, StageOutput, kept_rows
from essaybench.curate.classify import ClassifyParams, run_classify
from essaybench.curate.filter import FilterParams, run_filter
from essaybench.curate.genre_rules import ANY_GENRE
from essaybench.curate.labeler import Genre, PromptLabeler
from essaybench.curate.table import RECORD_COLUMNS

GENRE_CLASSES = tuple(g.value for g in Genre)
TRUE_CLASSES = (*GENRE_CLASSES, "multi", "open", "non_essay")
PRED_CLASSES = (*TRUE_CLASSES[:-1], "undecided", "dropped")
Length = tuple[int | None, int | None, int | None]  # (min, max, approx) characters
_M = TypeVar("_M", bound=BaseModel)


class BodyLength(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    min: int | None = None
    max: int | None = None
    approx: int | None = None


class _Labels(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    # False for a set that labels genre only (data/eval/heldout_public): its essays carry no
    # Open/Constrained or body-length label, and the report leaves them out of those figures
    labels_set_and_length: ClassVar[bool] = True

    is_essay: bool
    genre: Genre | None = None
    allowed_genres: list[str] = Field(default_factory=list)
    genre_open: bool = False
    prompt_set: Literal["open", "constrained"] | None = None
    body_length: BodyLength | None = None

    @model_validator(mode="after")
    def _consistent(self) -> _Labels:
        allowed = set(self.allowed_genres)
        if not self.is_essay:
            if allowed or self.genre or self.genre_open or self.prompt_set or self.body_length:
                raise ValueError("a non-essay carries no genre, set or length label")
            return self
        if not allowed or (self.prompt_set is None and self.labels_set_and_length):
            raise ValueError("an essay needs allowed_genres and a prompt_set")
        if self.genre_open != (allowed == {ANY_GENRE}):
            raise ValueError('genre_open is true exactly when allowed_genres is ["any"]')
        if not allowed <= {*GENRE_CLASSES, ANY_GENRE} or (ANY_GENRE in allowed and
                                                           len(allowed) > 1):
            raise ValueError(f"allowed_genres {self.allowed_genres} are not genres or ['any']")
        if (self.genre is not None) != (len(allowed) == 1 and not self.genre_open) or (
                self.genre is not None and allowed != {self.genre.value}):
            raise ValueError("genre is set exactly when allowed_genres is that one genre")
        return self

    @property
    def true_class(self) -> str:
        if not self.is_essay:
            return "non_essay"
        if self.genre_open:
            return "open"
        return self.genre.value if self.genre is not None else "multi"

    @property
    def length(self) -> Length:
        b = self.body_length
        return (None, None, None) if b is None else (b.min, b.max, b.approx)


class EvalItem(_Labels):
    id: str
    kind: str
    text: str


class WritingBenchLabel(_Labels):
    line: int = Field(ge=1)  # line of zh_queries.jsonl
    index: str  # the query's own index there, checked when the text is read
    domain2: str


def read_jsonl_models(path: Path, model: type[_M]) -> list[_M]:
    """Each non-blank line of ``path`` as ``model``; ValueError naming file:line."""
    items = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(model.model_validate_json(line))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(line)"
            raise ValueError(f"{path}:{n}: {where}: {first['msg']}") from None
    return items


def load_eval_set(path: Path) -> list[EvalItem]:
    items = read_jsonl_models(path, EvalItem)
    dup = [k for k, n in Counter(i.id for i in items).items() if n > 1]
    if dup:
        raise ValueError(f"{path}: id {dup[0]} appears more than once")
    return items


def writingbench_query(rows: list[str], line: int, index: str, labels: Path,
                       queries: Path) -> str:
    """The query text at ``line`` (1-based) of WritingBench's ``queries`` file (``rows``:
    its lines), checked to carry the ``index`` the label in ``labels`` names."""
    if line > len(rows):
        raise ValueError(f"{labels}: line {line} is past the end of {queries}")
    query = json.loads(rows[line - 1])
    if str(query.get("index")) != index:
        raise ValueError(f"{labels}: {queries} line {line} has index "
                         f"{query.get('index')!r}, the label says {index!r}")
    return str(query["query"])


def load_writingbench_labels(labels: Path, queries: Path) -> list[EvalItem]:
    """The labelled sample with its texts read from ``queries`` (never stored with us)."""
    rows = queries.read_text(encoding="utf-8").splitlines()
    items = []
    for label in read_jsonl_models(labels, WritingBenchLabel):
        text = writingbench_query(rows, label.line, label.index, labels, queries)
        fields = label.model_dump(exclude={"line", "index", "domain2"})
        items.append(EvalItem(id=f"wb-line{label.line}", kind="writingbench", text=text,
                              **fields))
    return items


@dataclass(frozen=True)
class Outcome:
    item: EvalItem
    decision: str  # filtered | kept | unclassified
    reason: str | None
    pred_class: str
    allowed: tuple[str, ...]
    prompt_set: str | None
    length: Length
    detail: str

    @property
    def decided(self) -> bool:
        return self.pred_class not in ("undecided", "dropped")

    @property
    def correct(self) -> bool:
        return self.decided and set(self.allowed) == set(self.item.allowed_genres)


def _pred_class(row: dict[str, object]) -> str:
    allowed = list(row.get("allowed_genres") or [])  # type: ignore[call-overload]
    if row["genre"] is not None:
        return str(row["genre"])
    if allowed == [ANY_GENRE]:
        return "open"
    return "multi" if allowed else "undecided"


@dataclass(frozen=True)
class Evaluation:
    outcomes: list[Outcome]
    classify_meta: dict[str, Any]  # the classify stage's meta (labeler call statuses …)


def evaluate(items: Sequence[EvalItem], filter_params: FilterParams,
             classify_params: ClassifyParams,
             labeler: PromptLabeler | None = None) -> Evaluation:
    """Every item through filter then classify, as the curate flow runs them."""
    filtered, stage = filter_and_classify([(i.id, i.text) for i in items], filter_params,
                                          classify_params, labeler)
    classified = stage.table
    by_id = {r["record_id"]: r for r in classified.iter_rows(named=True)}
    outcomes = []
    for item, frow in zip(items, filtered.iter_rows(named=True), strict=True):
        row = by_id.get(item.id)
        if row is None:
            outcomes.append(Outcome(item, str(frow["decision"]), frow["reason"], "dropped", (),
                                    None, (None, None, None), str(frow["detail"] or "")))
            continue
        req = length_requirement(str(row["text"]))
        length: Length = ((None, None, None) if req is None
                          else (req.min_chars, req.max_chars, req.approx_chars))
        outcomes.append(Outcome(item, str(row["decision"]), row["reason"], _pred_class(row),
                                tuple(row["allowed_genres"] or ()), row["prompt_set"], length,
                                str(row["detail"] or "")))
    return Evaluation(outcomes, stage.meta)


def filter_and_classify(items: Sequence[tuple[str, str]], filter_params: FilterParams,
                        classify_params: ClassifyParams, labeler: PromptLabeler | None = None,
                        ) -> tuple[pl.DataFrame, StageOutput]:
    """(id, text) pairs through the real filter and classify stages: the filter table
    (every item, ``record_id`` = id) and the classify stage's output (the kept ones)."""
    n = len(items)
    data: dict[str, list[str | None]] = {c: [None] * n for c in RECORD_COLUMNS}
    data["record_id"] = [i for i, _ in items]
    data["source"] = ["eval"] * n
    data["raw_text"] = [t for _, t in items]
    data["decision"] = [Decision.KEPT.value] * n
    filtered = run_filter(pl.DataFrame(data, schema=RECORD_COLUMNS), filter_params).table
    return filtered, run_classify(kept_rows(filtered), classify_params, labeler)


@dataclass
class QualityReport:
    n: int
    n_essays: int
    per_class: dict[str, tuple[float | None, float | None, int]]  # precision, recall, support
    confusion: dict[str, Counter[str]]
    decided: int
    decided_correct: int
    essays_decided: int
    set_checked: int
    set_correct: int
    length_correct: int
    length_checked: int  # essays with a body-length label
    non_essays: int
    reached_classify: int  # non-essays the filter let through
    leaked: list[str]  # ids of non-essays published (classify kept them)
    unresolved: Counter[str] = field(default_factory=Counter)  # essay reasons left

    @property
    def genre_precision(self) -> float | None:
        return _ratio(self.decided_correct, self.decided)

    @property
    def decided_share(self) -> float | None:
        return _ratio(self.essays_decided, self.n_essays)

    @property
    def set_accuracy(self) -> float | None:
        return _ratio(self.set_correct, self.set_checked)

    @property
    def length_accuracy(self) -> float | None:
        return _ratio(self.length_correct, self.length_checked)

    @property
    def leak_rate(self) -> float | None:
        return _ratio(len(self.leaked), self.non_essays)


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def quality_report(outcomes: Sequence[Outcome]) -> QualityReport:
    confusion: dict[str, Counter[str]] = {c: Counter() for c in TRUE_CLASSES}
    for o in outcomes:
        confusion[o.item.true_class][o.pred_class] += 1
    per_class = {}
    for c in TRUE_CLASSES:
        pred = "dropped" if c == "non_essay" else c
        hits = confusion[c][pred]
        predicted = sum(row[pred] for row in confusion.values())
        support = sum(confusion[c].values())
        per_class[c] = (_ratio(hits, predicted), _ratio(hits, support), support)
    essays = [o for o in outcomes if o.item.is_essay]
    # a non-essay that reached classify and got a genre is a wrong decision too
    decided = [o for o in outcomes if o.decided]
    with_set = [o for o in essays if o.prompt_set is not None and o.item.prompt_set is not None]
    with_length = [o for o in essays if o.item.labels_set_and_length]
    non = [o for o in outcomes if not o.item.is_essay]
    return QualityReport(
        n=len(outcomes), n_essays=len(essays), per_class=per_class, confusion=confusion,
        decided=len(decided), decided_correct=sum(o.correct for o in decided),
        essays_decided=sum(o.decided for o in essays), set_checked=len(with_set),
        set_correct=sum(o.prompt_set == o.item.prompt_set for o in with_set),
        length_correct=sum(o.length == o.item.length for o in with_length),
        length_checked=len(with_length),
        non_essays=len(non), reached_classify=sum(o.pred_class != "dropped" for o in non),
        leaked=[o.item.id for o in non if o.decision == Decision.KEPT.value],
        unresolved=Counter(o.reason or "?" for o in essays
                           if o.decision != Decision.KEPT.value))


TARGET_PRECISION = 0.95  # rules only, among the prompts the rules decide
TARGET_DECIDED = 0.85  # rules only, share of essays decided


def targets_met(report: QualityReport, min_precision: float = TARGET_PRECISION,
                min_decided: float = TARGET_DECIDED) -> dict[str, bool]:
    """The rules-only targets (issue 15's by default), each met or not."""
    precision, decided = report.genre_precision, report.decided_share
    return {
        f"genre precision >= {min_precision}": precision is not None
        and precision >= min_precision,
        f"decided >= {min_decided:.0%}": decided is not None and decided >= min_decided,
        "no non-essay published": not report.leaked,
    }
