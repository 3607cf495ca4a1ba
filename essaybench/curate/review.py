"""Manual review of a classify snapshot: what needs a reviewer, and the decisions one makes.

``essaybench curate review`` is built on this module (the store and the terminal stay in
the CLI). A prompt *needs review* when the classify stage left it ``unclassified`` (its
genre or its Open/Constrained set undecided, with the reason and the evidence the rules
and the labeller saw), or, on request, when a label of a kept prompt came from the LLM
labeller (the least trusted source: a reviewer may want to confirm it). A prompt the
override file already decides is left out unless asked for: the next curate applies it.

A decision is written as an override entry (``curate.overrides``); labels are given in
English (``narrative``, ``open``), in Chinese (记叙文, 开放式) or by their first letter
(``n``, ``o``), so ``n,o`` means narrative and open. Besides one genre a reviewer may
decide that the prompt leaves the genre to the writer (``any``, 文体不限), that it offers
two or more genres (``argumentative,narrative``), or that it is no essay request at all
(``not_essay:<reason>``, also ``none``, ``exclude``, 非作文): the prompt is then removed
from the prompt set with that reason, and no longer listed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import polars as pl
import yaml
from pydantic import BaseModel, ConfigDict, Field

from essaybench.core.contracts import Decision
from essaybench.core.yamlio import YamlConfigError, read_yaml
from essaybench.curate.genre_rules import ANY_GENRE
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
_ANY_WORDS = frozenset({ANY_GENRE, "文体不限", "体裁不限", "不限文体", "open_genre"})
_NOT_ESSAY_WORDS = frozenset({"not_essay", "not-essay", "none", "exclude", "非作文", "不是作文"})
_REASON = re.compile(r"^\s*(?P<word>[^:：,，\s]+)\s*[:：]\s*(?P<reason>.*)$", re.S)
LABEL_HELP = ("a genre (argumentative|narrative|descriptive|expository, 议论文|记叙文|描写文|"
              "说明文, or a|n|d|e), two or more genres the prompt offers, or any (文体不限), "
              "and/or a set (open|constrained, 开放式|限制式, or o|c), comma-separated; or "
              "not_essay:<reason> to remove a prompt that asks for no essay")


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
    labeller: str | None = None  # what the LLM labeller answered and what became of it


@dataclass(frozen=True)
class ReviewLabels:
    """A reviewer's decision on one prompt: its genre (one, a choice, or any), its prompt
    set (None: unset), or that it is not an essay (with the reason, if given inline)."""

    genre: Genre | None
    prompt_set: PromptSetLabel | None
    allowed_genres: tuple[str, ...] | None = None  # ("any",) or two or more genres
    not_essay: bool = False
    reason: str | None = None  # of not_essay, given as not_essay:<reason>

    @property
    def decides_genre(self) -> bool:
        return self.not_essay or self.genre is not None or self.allowed_genres is not None


def _not_essay(value: str) -> ReviewLabels | None:
    """``not_essay`` or ``not_essay:<reason>`` (any not-essay word), else None."""
    plain = value.strip()
    found = _REASON.match(plain)
    word, reason = (found["word"], found["reason"].strip()) if found else (plain, "")
    if word.lower() not in _NOT_ESSAY_WORDS:
        return None
    return ReviewLabels(None, None, not_essay=True, reason=reason or None)


def parse_labels(value: str) -> ReviewLabels:
    """``"narrative,open"`` (or 记叙文, n, any, ``argumentative,narrative``,
    ``not_essay:<reason>`` ...) as labels; ValueError naming the bad word."""
    removed = _not_essay(value)
    if removed is not None:
        return removed
    genres: list[Genre] = []
    any_genre = False
    pset: PromptSetLabel | None = None
    words = [w.strip() for w in value.replace("，", ",").replace(" ", ",").split(",")]
    for word in filter(None, words):
        key = word.lower()
        if key in _NOT_ESSAY_WORDS:
            raise ValueError(f"{word!r} stands alone: not_essay:<reason>, no other label")
        if key in _ANY_WORDS:
            any_genre = True
        elif key in _GENRE_WORDS and _GENRE_WORDS[key] not in genres:
            genres.append(_GENRE_WORDS[key])
        elif key in _SET_WORDS and pset is None:
            pset = _SET_WORDS[key]
        elif key in _GENRE_WORDS or key in _SET_WORDS:
            raise ValueError(f"{word!r} gives {'a genre' if key in _GENRE_WORDS else 'a set'} "
                             "twice")
        else:
            raise ValueError(f"{word!r} is neither a genre nor a set; give {LABEL_HELP}")
    if any_genre and genres:
        raise ValueError("any (文体不限) leaves the genre to the writer: give no genre with it")
    if not (genres or any_genre or pset):
        raise ValueError(f"no label given; give {LABEL_HELP}")
    if any_genre:
        return ReviewLabels(None, pset, (ANY_GENRE,))
    if len(genres) > 1:
        return ReviewLabels(None, pset, tuple(g.value for g in Genre if g in genres))
    return ReviewLabels(genres[0] if genres else None, pset)


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
    """The override entry of a decision; ValueError for not_essay without a reason (inline
    or ``note``)."""
    if labels.not_essay:
        why = labels.reason or (note.strip() if note else "")
        if not why:
            raise ValueError("not_essay needs the reviewer's reason: not_essay:<reason> "
                             "(or a note)")
        return OverrideEntry(not_essay=True, note=why, reviewer=reviewer or None)
    return OverrideEntry(genre=labels.genre, allowed_genres=labels.allowed_genres,
                         prompt_set=labels.prompt_set, note=note or None,
                         reviewer=reviewer or None)


def still_needs(item: ReviewItem, decided: OverrideEntry) -> list[Need]:
    """What ``item`` would still lack after ``decided`` is applied (nothing once it is
    decided not to be an essay; a choice of genres or any genre answers the genre)."""
    if decided.not_essay:
        return []
    return [need for need in item.needs
            if not (decided.decides_genre if need == "genre" else decided.prompt_set)]


# --- which prompts ------------------------------------------------------------------


def _where(row: Mapping[str, Any]) -> str:
    """Source and locator of the record, and its own id in the source where it has one
    ("chat line 12 (id q-0012)"): the id a reviewer looks the record up by."""
    source, locator, ref = row.get("source"), row.get("locator"), row.get("source_ref")
    where = " ".join(str(x) for x in (source, locator) if x) or "?"
    return f"{where} (id {ref})" if ref else where


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
            genre_span=row.get("genre_span"), genre_segment=row.get("genre_segment"),
            labeller=row.get("llm_answer") or _labeller_in(row.get("detail")))
        settled = item.decided is not None and (
            not still_needs(item, item.decided) if needs else True)
        if include_decided or not settled:
            items.append(item)
    return items


def _labeller_in(detail: str | None) -> str | None:
    """The labeller's note in a detail written before the ``llm_answer`` column existed
    ("genre undecided (rule: …; llm parse_error: …); to resolve, …")."""
    if not detail or "; llm " not in detail:
        return None
    note = detail.split("; llm ", 1)[1]
    return "llm " + note.rsplit("); to resolve", 1)[0]


def unknown_ids(prompt_ids: Iterable[str], table: pl.DataFrame) -> list[str]:
    """The ids among ``prompt_ids`` that are not prompts of the snapshot, sorted."""
    return sorted(set(prompt_ids) - set(table["prompt_id"].to_list()))


# --- the to-fill review file (--export / --apply) -------------------------------------


class ReviewFileItem(BaseModel):
    """One prompt of a review file: the reviewer fills genre / prompt_set (note, reviewer);
    the other fields are context, written by --export and not applied."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_id: str
    genre: str | list[str] | None = None
    allowed_genres: list[str] = Field(default_factory=list)
    not_essay: bool = False
    prompt_set: str | None = None
    note: str | None = None
    reviewer: str | None = None
    needs: list[str] = Field(default_factory=list)
    why: str | None = None
    current: str | None = None
    text: str | None = None
    genre_evidence: str | None = None
    labeller: str | None = None
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
# expository; 议论文 记叙文 描写文 说明文 are accepted too; `any` or allowed_genres: [any]
# when the prompt leaves the genre to the writer; two or more genres, e.g.
# [argumentative, narrative], when it offers a choice) and/or prompt_set (open |
# constrained). A prompt that asks for no essay: `not_essay: true` (or genre: not_essay) and
# the reason in note; it is removed from the prompt set. note and reviewer are otherwise
# optional. An item left blank is skipped. Then run
#   essaybench curate review --apply {path}
# which writes the filled items to the override file; the next `essaybench curate` (or
# `essaybench curate --from-stage classify`) applies them. Other fields are context only.
"""


def _current(item: ReviewItem) -> str:
    genre = f"{item.genre} ({item.genre_source})" if item.genre else "undecided"
    if item.genre is None and item.allowed_genres:
        genre += f" (the prompt allows {', '.join(item.allowed_genres)})"
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
    # allowed_genres is a decision to fill in: what the rules found is context (current)
    doc = ReviewFile(snapshot_id=snapshot_id, items=[ReviewFileItem(
        prompt_id=i.prompt_id,
        genre=i.decided.genre.value if i.decided and i.decided.genre else None,
        allowed_genres=list(i.decided.allowed_genres or ()) if i.decided else [],
        not_essay=bool(i.decided and i.decided.not_essay),
        prompt_set=i.decided.prompt_set.value if i.decided and i.decided.prompt_set else None,
        note=i.decided.note if i.decided else None,
        reviewer=i.decided.reviewer if i.decided else None,
        needs=list(i.needs), why=i.why, current=_current(i), text=i.text,
        genre_evidence=i.genre_evidence, labeller=i.labeller, set_evidence=i.set_evidence,
        where=i.where)
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
        try:
            labels = _filled_labels(item)
            if labels is not None:
                decisions[item.prompt_id] = entry(labels, item.note, item.reviewer)
        except ValueError as exc:
            raise doc.fail(f"item {item.prompt_id!r}: {exc}", at) from None
    return decisions


def _filled_labels(item: ReviewFileItem) -> ReviewLabels | None:
    """What a reviewer filled in: genre (a word, a list, any, not_essay), allowed_genres,
    not_essay, prompt_set; None for a blank item. ValueError for a contradiction."""
    genre = ",".join(item.genre) if isinstance(item.genre, list) else (item.genre or "")
    genre = genre.strip()
    if item.allowed_genres:
        if genre:
            raise ValueError("give genre or allowed_genres, not both")
        genre = ",".join(item.allowed_genres)
    if item.not_essay:
        if genre:
            raise ValueError("not_essay takes no genre or allowed_genres")
        genre = "not_essay"
    pset = (item.prompt_set or "").strip()
    if not (genre or pset):
        return None
    labels = parse_labels(",".join(v for v in (genre, pset) if v))
    if genre and not labels.decides_genre:
        raise ValueError(f"genre {genre!r} is not a genre, a choice, any or not_essay")
    if pset and (labels.prompt_set is None or labels.not_essay):
        raise ValueError(f"prompt_set {pset!r} is not open or constrained"
                         + (" (a prompt that is not an essay has no set)"
                            if labels.not_essay else ""))
    return labels
