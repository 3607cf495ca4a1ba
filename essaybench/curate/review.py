"""Manual review of a classify snapshot: what needs a reviewer, and the decisions one makes.

``essaybench curate review`` is built on this module (the store and the terminal stay in
the CLI). A prompt *needs review* when the classify stage left it ``unclassified`` (its
genre or its Open/Constrained set undecided, with the reason and the evidence the rules
and the labeller saw), or, on request, when a label of a kept prompt came from the LLM
labeller (the least trusted source: a reviewer may want to confirm it). A prompt the
override file already decides is left out unless asked for: the next curate applies it.

A decision is written as an override entry (``curate.overrides``); labels are given in
English (``narrative``, ``open``), in Chinese (记叙文, 开放式) or by their first letter
(``n``, ``o``), so ``n,o`` means narrative and open.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import polars as pl
import yaml
from pydantic import BaseModel, ConfigDict, Field

from essaybench.core.contracts import Decision
from essaybench.core.yamlio import YamlConfigError, read_yaml
from essaybench.curate.labeler import Genre, PromptSetLabel
from essaybench.curate.overrides import OverrideEntry

Need = Literal["genre", "prompt_set"]

_GENRE_WORDS: dict[str, Genre] = {
    **{g.value: g for g in Genre}, **{g.value[0]: g for g in Genre},
    "议论文": Genre.ARGUMENTATIVE, "记叙文": Genre.NARRATIVE,
    "描写文": Genre.DESCRIPTIVE, "说明文": Genre.EXPOSITORY,
}
_SET_WORDS: dict[str, PromptSetLabel] = {
    **{s.value: s for s in PromptSetLabel}, **{s.value[0]: s for s in PromptSetLabel},
    "开放式": PromptSetLabel.OPEN, "限制式": PromptSetLabel.CONSTRAINED,
}
LABEL_HELP = ("a genre (argumentative|narrative|descriptive|expository, 议论文|记叙文|描写文|"
              "说明文, or a|n|d|e) and/or a set (open|constrained, 开放式|限制式, or o|c), "
              "comma-separated")


class ReviewInputError(YamlConfigError):
    """A decision or a filled-in review file is wrong: the message names what and where."""


@dataclass(frozen=True)
class ReviewItem:
    """One prompt that needs (or was asked for) a reviewer's decision."""

    prompt_id: str
    text: str
    needs: tuple[Need, ...]  # what the stage left undecided (empty for a flagged kept row)
    why: str  # the stage's reason code, or why a kept row is listed
    genre: str | None
    genre_source: str | None
    genre_evidence: str
    prompt_set: str | None
    set_source: str | None
    set_evidence: str
    where: str  # source and locator of the first raw record
    decided: OverrideEntry | None  # what the override file already says about it
    allowed_genres: tuple[str, ...] = ()  # a choice of genres, or ("any",) for 文体不限
    genre_span: str | None = None  # the passage the genre evidence came from
    genre_segment: str | None = None  # and its segment: task, requirements or material


@dataclass(frozen=True)
class ReviewLabels:
    """A reviewer's decision on one prompt: its genre and its prompt set (None: unset)."""

    genre: Genre | None
    prompt_set: PromptSetLabel | None


def parse_labels(value: str) -> ReviewLabels:
    """``"narrative,open"`` (or 记叙文, n, ...) as labels; ValueError naming the bad word."""
    genre: Genre | None = None
    pset: PromptSetLabel | None = None
    words = [w.strip() for w in value.replace("，", ",").replace(" ", ",").split(",")]
    for word in filter(None, words):
        key = word.lower()
        if key in _GENRE_WORDS and genre is None:
            genre = _GENRE_WORDS[key]
        elif key in _SET_WORDS and pset is None:
            pset = _SET_WORDS[key]
        elif key in _GENRE_WORDS or key in _SET_WORDS:
            raise ValueError(f"{word!r} gives a second {'genre' if key in _GENRE_WORDS else 'set'}")
        else:
            raise ValueError(f"{word!r} is neither a genre nor a set; give {LABEL_HELP}")
    if genre is None and pset is None:
        raise ValueError(f"no label given; give {LABEL_HELP}")
    return ReviewLabels(genre, pset)


def parse_decision(spec: str) -> tuple[str, ReviewLabels]:
    """``PROMPT_ID=LABELS`` (the ``--decide`` option); ValueError saying what is wrong."""
    prompt_id, sep, labels = spec.partition("=")
    if not sep:
        raise ValueError(f"{spec!r}: expected PROMPT_ID=LABELS, e.g. "
                         "p0123456789abcde=narrative,open")
    try:
        return prompt_id.strip(), parse_labels(labels)
    except ValueError as exc:
        raise ValueError(f"{spec!r}: {exc}") from None


def entry(labels: ReviewLabels, note: str | None = None,
          reviewer: str | None = None) -> OverrideEntry:
    return OverrideEntry(genre=labels.genre, prompt_set=labels.prompt_set, note=note or None,
                         reviewer=reviewer or None)


def still_needs(item: ReviewItem, decided: OverrideEntry) -> list[Need]:
    """What ``item`` would still lack after ``decided`` is applied."""
    return [need for need in item.needs if getattr(decided, need) is None]


# --- which prompts ------------------------------------------------------------------


def _where(row: Mapping[str, Any]) -> str:
    source, locator = row.get("source"), row.get("locator")
    return " ".join(str(x) for x in (source, locator) if x) or "?"


def review_items(table: pl.DataFrame, overrides: Mapping[str, OverrideEntry], *,
                 include_llm: bool = False, include_decided: bool = False) -> list[ReviewItem]:
    """The rows of a classify snapshot that need a decision, in snapshot order: every
    unclassified one, and with ``include_llm`` every kept one labelled by the LLM. Rows the
    override file already decides (everything they lack) only with ``include_decided``."""
    missing = {"prompt_id", "text", "decision", "genre", "prompt_set"} - set(table.columns)
    if missing:
        raise ValueError(f"not a classify snapshot: it lacks the columns {sorted(missing)}")
    items: list[ReviewItem] = []
    seen: set[str] = set()
    for row in table.iter_rows(named=True):
        pid = row["prompt_id"]
        unclassified = row["decision"] == Decision.UNCLASSIFIED.value
        by_llm = row["decision"] == Decision.KEPT.value and "llm" in (
            row.get("genre_source"), row.get("set_source"))
        if pid in seen or not (unclassified or (include_llm and by_llm)):
            continue
        seen.add(pid)
        needs: tuple[Need, ...] = tuple(
            n for n in ("genre", "prompt_set") if unclassified and row[n] is None)
        item = ReviewItem(
            prompt_id=pid, text=row["text"] or "", needs=needs,
            why=(row.get("reason") or "") if unclassified else "labelled by the LLM",
            genre=row["genre"], genre_source=row.get("genre_source"),
            genre_evidence=row.get("genre_evidence") or "", prompt_set=row["prompt_set"],
            set_source=row.get("set_source"), set_evidence=row.get("set_evidence") or "",
            where=_where(row), decided=overrides.get(pid),
            allowed_genres=tuple(row.get("allowed_genres") or ()),
            genre_span=row.get("genre_span"), genre_segment=row.get("genre_segment"))
        settled = item.decided is not None and (
            not still_needs(item, item.decided) if needs else True)
        if include_decided or not settled:
            items.append(item)
    return items


def unknown_ids(prompt_ids: Iterable[str], table: pl.DataFrame) -> list[str]:
    """The ids among ``prompt_ids`` that are not prompts of the snapshot, sorted."""
    return sorted(set(prompt_ids) - set(table["prompt_id"].to_list()))


# --- the to-fill review file (--export / --apply) -------------------------------------


class ReviewFileItem(BaseModel):
    """One prompt of a review file: the reviewer fills genre / prompt_set (note, reviewer);
    the other fields are context, written by --export and not applied."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_id: str
    genre: str | None = None
    prompt_set: str | None = None
    note: str | None = None
    reviewer: str | None = None
    needs: list[str] = Field(default_factory=list)
    why: str | None = None
    current: str | None = None
    allowed_genres: list[str] = Field(default_factory=list)
    text: str | None = None
    genre_evidence: str | None = None
    set_evidence: str | None = None
    where: str | None = None


class ReviewFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1] = 1
    snapshot_id: str | None = None
    items: list[ReviewFileItem] = Field(default_factory=list)


_REVIEW_HEADER = """\
# essaybench curate review: {n} prompt(s) of classify snapshot {snapshot} to decide.
# For each item fill in what `needs` names: genre (argumentative | narrative | descriptive |
# expository; 议论文 记叙文 描写文 说明文 are accepted too) and/or prompt_set (open |
# constrained); note and reviewer are optional. An item left blank is skipped. Then run
#   essaybench curate review --apply {path}
# which writes the filled items to the override file; the next `essaybench curate` (or
# `essaybench curate --from-stage classify`) applies them. Other fields are context only.
"""


def _current(item: ReviewItem) -> str:
    genre = f"{item.genre} ({item.genre_source})" if item.genre else "undecided"
    pset = f"{item.prompt_set} ({item.set_source})" if item.prompt_set else "undecided"
    return f"genre {genre}; set {pset}"


class _ReviewDumper(yaml.SafeDumper):
    """A multi-line prompt as a literal block, line for line as the reviewer reads it."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value,
                                   style="|" if "\n" in value else None)


_ReviewDumper.add_representer(str, _str)


def review_file_text(items: list[ReviewItem], snapshot_id: str, path: Path) -> str:
    """The YAML text of a to-fill review file for ``items``."""
    doc = ReviewFile(snapshot_id=snapshot_id, items=[ReviewFileItem(
        prompt_id=i.prompt_id,
        genre=i.decided.genre.value if i.decided and i.decided.genre else None,
        prompt_set=i.decided.prompt_set.value if i.decided and i.decided.prompt_set else None,
        note=i.decided.note if i.decided else None,
        reviewer=i.decided.reviewer if i.decided else None,
        needs=list(i.needs), why=i.why, current=_current(i),
        allowed_genres=list(i.allowed_genres), text=i.text,
        genre_evidence=i.genre_evidence, set_evidence=i.set_evidence, where=i.where)
        for i in items])
    body = yaml.dump(doc.model_dump(mode="json"), Dumper=_ReviewDumper, allow_unicode=True,
                     sort_keys=False, width=100)
    return _REVIEW_HEADER.format(n=len(items), snapshot=snapshot_id, path=path) + body


def read_review_file(path: Path) -> dict[str, OverrideEntry]:
    """The filled items of a review file as override entries, by prompt_id (blank items
    left out); ReviewInputError naming the file, line and item for anything invalid."""
    doc = read_yaml(path, "review file", error=ReviewInputError)
    review = doc.validate(ReviewFile)
    decisions: dict[str, OverrideEntry] = {}
    for index, item in enumerate(review.items):
        at = ("items", index)
        if item.prompt_id in decisions:
            raise doc.fail(f"item {item.prompt_id!r} appears twice", at)
        words = ",".join(v for v in (item.genre, item.prompt_set) if v and v.strip())
        if not words:
            continue
        try:
            labels = parse_labels(words)
        except ValueError as exc:
            raise doc.fail(f"item {item.prompt_id!r}: {exc}", at) from None
        if item.genre and item.genre.strip() and labels.genre is None:
            raise doc.fail(f"item {item.prompt_id!r}: genre {item.genre!r} is not a genre", at)
        if item.prompt_set and item.prompt_set.strip() and labels.prompt_set is None:
            raise doc.fail(f"item {item.prompt_id!r}: prompt_set {item.prompt_set!r} is not "
                           "open or constrained", at)
        decisions[item.prompt_id] = entry(labels, item.note, item.reviewer)
    return decisions
