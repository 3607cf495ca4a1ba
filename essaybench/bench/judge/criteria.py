"""A gold prompt's acceptance criteria in its judge call (``judge.gold_criteria``).

The wording is ``rubrics/essay/criteria_block.v<N>.yaml``; the block is appended to the
system message the judge prompt rendered, so a call without criteria is exactly the call
it was before the option existed (same bytes, same ledger key).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from string import Template
from typing import Self

from pydantic import Field, StrictInt, model_validator

from essaybench.bench.rubrics import (
    Text,
    VersionedFile,
    check_template,
    load_validated,
    rubrics_dir,
)

DEFAULT_CRITERIA_BLOCK = "criteria_block.v1.yaml"


class CriteriaBlock(VersionedFile):
    """rubrics/essay/criteria_block.v<N>.yaml; ``$name`` placeholders, ``$$`` for $."""

    id: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    version: StrictInt = Field(ge=1)
    description: Text
    block: Text
    criterion_line: Text

    @model_validator(mode="after")
    def _placeholders(self) -> Self:
        check_template("block", self.block, ("criteria",), required=("criteria",))
        check_template("criterion_line", self.criterion_line, ("number", "criterion"),
                       required=("criterion",))
        return self

    def render(self, criteria: Sequence[str]) -> str:
        """The block for ``criteria`` (each criterion's white space collapsed: a line
        each)."""
        lines = [Template(self.criterion_line).substitute(
            number=str(n), criterion=" ".join(c.split())).strip()
            for n, c in enumerate(criteria, 1)]
        return Template(self.block).substitute(criteria="\n".join(lines)).strip()


def load_criteria_block(path: Path | str | None = None) -> CriteriaBlock:
    """A criteria block file (default: the built-in ``criteria_block.v1.yaml``)."""
    return load_validated(CriteriaBlock,
                          path if path is not None else rubrics_dir() / DEFAULT_CRITERIA_BLOCK,
                          "criteria block")


@lru_cache(maxsize=1)
def default_criteria_block() -> CriteriaBlock:
    return load_criteria_block()


def with_criteria(messages: list[dict[str, str]], block: str) -> list[dict[str, str]]:
    """``messages`` with ``block`` appended to the system message (the first)."""
    first, *rest = messages
    if first["role"] != "system":
        raise ValueError("the judge prompt has no system message to hold the criteria")
    return [{"role": "system", "content": f"{first['content']}\n\n{block}"}, *rest]
