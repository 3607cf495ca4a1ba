"""The record every constraint rule produces."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

ConstraintKind = Literal[
    "length", "paragraphs", "count", "title", "audience", "material", "style", "content",
    "format"]
# What a length is a length of. A stored length without a target (written before targets
# existed) is a body length: that is how every length was read then.
LengthTarget = Literal["body", "title", "summary", "other"]
LENGTH_TARGETS: tuple[LengthTarget, ...] = ("body", "title", "summary", "other")


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
    target: str | None = None  # length: a LengthTarget; count: the thing counted (评语, 诗)
    unit: str | None = None  # count: the measure word (条 首 篇 点 句)

    def to_json_dict(self) -> dict[str, object]:
        d = {k: v for k, v in asdict(self).items() if v is not None}
        d["text"] = d.pop("evidence")
        d["span"] = list(self.span)
        return d
