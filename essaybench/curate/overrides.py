"""The manual-review override file: a reviewer's labels win over rules and the LLM.

Format (YAML, validated; unknown keys are errors)::

    version: 1
    overrides:
      p0123456789abcde:        # prompt_id, as in the classify snapshot
        genre: narrative       # argumentative | narrative | descriptive | expository
        prompt_set: open       # open | constrained
        note: 题目只给了话题     # why (optional)
        reviewer: zhang        # who (optional)
      p1123456789abcde:
        allowed_genres: [any]  # the genre is the writer's choice (文体不限); or two or more
                               # genres the prompt offers: [argumentative, narrative]
      p2123456789abcde:
        not_essay: true        # not an essay request: removed from the prompt set
        note: 请假条，不是作文    # required with not_essay: the reviewer's reason

An entry needs a genre (or allowed_genres), a prompt_set, or not_essay with a note;
``genre`` and ``allowed_genres`` exclude each other, and ``not_essay`` excludes every label.
An entry whose prompt_id is not among the classified rows is reported as unused (a
warning: the prompt may have been dropped upstream), never an error. Any invalid entry
stops the stage with a message that names the file and the entry.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from essaybench.core.yamlio import Loc, YamlConfigError, read_yaml
from essaybench.curate.genre_rules import ANY_GENRE
from essaybench.curate.labeler import Genre, PromptSetLabel

PromptId = Annotated[str, StringConstraints(pattern=r"^p[0-9a-f]{15}$")]  # hashing.prompt_id


class OverrideFileError(YamlConfigError):
    """The override file is unreadable or invalid; the message names the file and the entry."""


_ALLOWED_WORDS = frozenset({ANY_GENRE, *(g.value for g in Genre)})


class OverrideEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    genre: Genre | None = Field(default=None, description="Genre label chosen by the reviewer.")
    allowed_genres: tuple[str, ...] | None = Field(
        default=None, description='["any"] (文体不限) or two or more genres the prompt offers.')
    not_essay: bool = Field(default=False, description="Not an essay request: removed from "
                            "the prompt set (the note gives the reason).")
    prompt_set: PromptSetLabel | None = Field(default=None, description="open or constrained.")
    note: str | None = Field(default=None, description="Why the reviewer chose these labels.")
    reviewer: str | None = Field(default=None, description="Who reviewed the prompt.")

    @field_validator("allowed_genres")
    @classmethod
    def _genre_choice(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        words = tuple(dict.fromkeys(str(v).strip().lower() for v in value))
        bad = [w for w in words if w not in _ALLOWED_WORDS]
        if bad:
            raise ValueError(f"{bad[0]!r} is neither a genre nor 'any'")
        if ANY_GENRE in words and len(words) > 1:
            raise ValueError("'any' stands alone: the writer chooses any genre")
        if words != (ANY_GENRE,) and len(words) < 2:
            raise ValueError("a choice needs two or more genres (one genre: give genre)")
        if words != (ANY_GENRE,):  # in the order of Genre, as the rules write a choice
            words = tuple(g.value for g in Genre if g.value in words)
        return words

    @model_validator(mode="after")
    def _sets_a_label(self) -> Self:
        if self.not_essay:
            if self.genre or self.allowed_genres or self.prompt_set:
                raise ValueError("not_essay takes no genre, allowed_genres or prompt_set")
            if not (self.note and self.note.strip()):
                raise ValueError("not_essay needs a note: the reviewer's reason")
            return self
        if self.genre is not None and self.allowed_genres is not None:
            raise ValueError("give genre or allowed_genres, not both")
        if self.genre is None and self.allowed_genres is None and self.prompt_set is None:
            raise ValueError("an override needs a genre (or allowed_genres), a prompt_set, "
                             "or not_essay with a note")
        return self

    @property
    def decides_genre(self) -> bool:
        """Whether the entry settles the genre question (a genre, a choice, not an essay)."""
        return self.not_essay or self.genre is not None or self.allowed_genres is not None


class OverrideFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1] = 1
    overrides: dict[PromptId, OverrideEntry] = Field(default_factory=dict)

    @field_validator("overrides", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return {} if value is None else value  # "overrides:" with every entry commented out




def load_overrides(path: Path | str) -> dict[str, OverrideEntry]:
    """The entries of an override file, by prompt_id; raises OverrideFileError."""
    doc = read_yaml(path, "override file", error=OverrideFileError)
    return doc.validate(OverrideFile, describe=_describe).overrides


def _describe(loc: Loc, msg: str) -> str:
    # A reviewer thinks in entries (prompt ids), not in pydantic's locations.
    steps = [str(part) for part in loc]
    if len(steps) >= 2 and steps[0] == "overrides":
        where = f"entry {steps[1]!r}"
        if steps[2:] == ["[key]"]:
            msg = "not a prompt_id ('p' + 15 hex digits, as in the classify snapshot)"
        elif steps[2:]:
            where += f", field {'.'.join(steps[2:])!r}"
    else:
        where = ".".join(steps) or "(top level)"
    return f"{where}: {msg}"


def unused_overrides(overrides: Iterable[str], prompt_ids: Iterable[str]) -> list[str]:
    """Override ids that match no classified prompt, sorted."""
    return sorted(set(overrides) - set(prompt_ids))
