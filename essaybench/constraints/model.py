"""The record every constraint rule produces."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

ConstraintKind = Literal[
    "length", "paragraphs", "title", "audience", "material", "style", "content", "format"]


@dataclass(frozen=True)
class Constraint:
    kind: ConstraintKind
    evidence: str  # == prompt[span[0]:span[1]]
    span: tuple[int, int]
    counts_for_set: bool = True  # False: boilerplate or a given title (see package doc)
    min_chars: int | None = None
    max_chars: int | None = None
    approx_chars: int | None = None
    min_count: int | None = None  # paragraphs, arguments, examples, rhetorical devices
    max_count: int | None = None
    value: str | None = None  # the given title

    def to_json_dict(self) -> dict[str, object]:
        d = {k: v for k, v in asdict(self).items() if v is not None}
        d["text"] = d.pop("evidence")
        d["span"] = list(self.span)
        return d
