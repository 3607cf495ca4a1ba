"""The manual-review override file: a reviewer's labels win over rules and the LLM.

Format (YAML, validated; unknown keys are errors)::

    version: 1
    overrides:
      p0123456789abcde:        # prompt_id, as in the classify snapshot
        genre: narrative       # argumentative | narrative | descriptive | expository
        prompt_set: open       # open | constrained
        note: 题目只给了话题     # why (optional)
        reviewer: zhang        # who (optional)

An entry needs a genre, a prompt_set, or both. An entry whose prompt_id is not
among the classified rows is reported as unused (a warning: the prompt may
have been dropped upstream), never an error. Any invalid entry stops the stage
with a message that names the file and the entry.
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
from essaybench.curate.labeler import Genre, PromptSetLabel

PromptId = Annotated[str, StringConstraints(pattern=r"^p[0-9a-f]{15}$")]  # hashing.prompt_id


class OverrideFileError(YamlConfigError):
    """The override file is unreadable or invalid; the message names the file and the entry."""


class OverrideEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    genre: Genre | None = Field(default=None, description="Genre label chosen by the reviewer.")
    prompt_set: PromptSetLabel | None = Field(default=None, description="open or constrained.")
    note: str | None = Field(default=None, description="Why the reviewer chose these labels.")
    reviewer: str | None = Field(default=None, description="Who reviewed the prompt.")

    @model_validator(mode="after")
    def _sets_a_label(self) -> Self:
        if self.genre is None and self.prompt_set is None:
            raise ValueError("an override needs a genre, a prompt_set, or both")
        return self


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
