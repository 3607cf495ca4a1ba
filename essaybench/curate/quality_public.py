"""Held-out public prompts (issue 29 item 5): real prompts the rules were not written with.

``data/eval/heldout_public/heldout_public.v1.jsonl`` holds real Chinese prompts from public,
permissively licensed repositories (gaokao exam items, public writing-request sets), each
with its provenance (repository, path, commit, licence, item) and a hand label: an essay
or not, and the genres it allows. It was labelled before any rule changed for it
(``data/eval/heldout_public/README.md``). Open/Constrained and body length are not
labelled: :class:`PublicItem` is an :class:`~essaybench.curate.quality.EvalItem` whose
report leaves them out.

Targets of issue 29 on this set, rules only: genre precision >= 0.97 among decided
prompts, >= 90% of essays decided (an open or multi-genre prompt counts decided when
right), no non-essay published.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from essaybench.curate.genre_rules import ANY_GENRE
from essaybench.curate.labeler import Genre
from essaybench.curate.quality import (
    GENRE_CLASSES,
    EvalItem,
    QualityReport,
    read_jsonl_models,
    targets_met,
)

TARGET_PRECISION = 0.97
TARGET_DECIDED = 0.90


class PublicSource(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    repo: str = Field(pattern=r"^[\w.-]+/[\w.-]+$")  # owner/name on GitHub
    path: str = Field(min_length=1)
    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    license: str = Field(min_length=1)
    item: str = Field(min_length=1)  # where in the file: index, line, test case


class PublicLabel(BaseModel):
    """One line of the file, as labelled."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9]+(?:-[a-z0-9]+)+$")
    text: str = Field(min_length=1)
    source: PublicSource
    is_essay: bool
    allowed_genres: list[str]
    note: str = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> PublicLabel:
        allowed = set(self.allowed_genres)
        if not self.is_essay and allowed:
            raise ValueError("a non-essay allows no genre")
        if self.is_essay and (not allowed or not allowed <= {*GENRE_CLASSES, ANY_GENRE}
                              or (ANY_GENRE in allowed and len(allowed) > 1)):
            raise ValueError(f"allowed_genres {self.allowed_genres}: one or more genres, "
                             "or ['any'] alone")
        if len(allowed) != len(self.allowed_genres):
            raise ValueError("allowed_genres repeats a genre")
        return self


class PublicItem(EvalItem):
    """A labelled public prompt as the quality report reads it (no set/length labels)."""

    labels_set_and_length: ClassVar[bool] = False
    source: PublicSource
    note: str


def load_public_set(path: Path) -> list[PublicItem]:
    """The labelled public prompts; ValueError naming file:line, or a repeated id."""
    labels = read_jsonl_models(path, PublicLabel)
    dup = [k for k, n in Counter(label.id for label in labels).items() if n > 1]
    if dup:
        raise ValueError(f"{path}: id {dup[0]} appears more than once")
    items = []
    for label in labels:
        allowed = label.allowed_genres
        single = len(allowed) == 1 and allowed != [ANY_GENRE]
        items.append(PublicItem(
            id=label.id, kind=label.id.rsplit("-", 1)[0], text=label.text,
            is_essay=label.is_essay, genre=Genre(allowed[0]) if single else None,
            allowed_genres=allowed, genre_open=allowed == [ANY_GENRE],
            source=label.source, note=label.note))
    return items


def public_targets_met(report: QualityReport) -> dict[str, bool]:
    """Issue 29's rules-only targets on this set, each met or not."""
    return targets_met(report, TARGET_PRECISION, TARGET_DECIDED)
