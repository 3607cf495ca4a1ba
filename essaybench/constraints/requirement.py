"""Length constraints of one target combined into one accepted range of characters."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from essaybench.constraints.model import Constraint, LengthTarget

APPROX_TOLERANCE = 0.10  # "约800字" accepts 720..880 characters


@dataclass(frozen=True)
class LengthRequirement:
    """The length constraints of one target combined: the tightest min and max, the first
    target (``approx_chars``). Never a range with min > max: a constraint that would make
    one is left out of the bounds and listed in ``ignored``."""

    min_chars: int | None
    max_chars: int | None
    approx_chars: int | None
    evidence: tuple[str, ...]  # the constraints combined, in text order
    target: LengthTarget = "body"
    ignored: tuple[str, ...] = ()  # evidence of constraints contradicting earlier ones

    def bounds(self) -> tuple[int | None, int | None]:
        """Accepted range; a target ``approx_chars`` allows ±APPROX_TOLERANCE."""
        lo, hi = self.min_chars, self.max_chars
        if self.approx_chars is not None:
            a_lo = math.ceil(self.approx_chars * (1 - APPROX_TOLERANCE))
            a_hi = math.floor(self.approx_chars * (1 + APPROX_TOLERANCE))
            lo = a_lo if lo is None else max(lo, a_lo)
            hi = a_hi if hi is None else min(hi, a_hi)
        return lo, hi

    def is_met(self, n_chars: int) -> bool:
        lo, hi = self.bounds()
        return (lo is None or n_chars >= lo) and (hi is None or n_chars <= hi)

    def admits(self, c: Constraint) -> bool:
        """Would adding ``c`` still leave a non-empty range?"""
        lo, hi = self.plus(c).bounds()
        return lo is None or hi is None or lo <= hi

    def plus(self, c: Constraint) -> LengthRequirement:
        """This requirement with ``c`` combined in (check ``admits`` first)."""
        def tighter(a: int | None, b: int | None, pick: Callable[[int, int], int]) -> int | None:
            return b if a is None else a if b is None else pick(a, b)

        return LengthRequirement(
            tighter(self.min_chars, c.min_chars, max), tighter(self.max_chars, c.max_chars, min),
            self.approx_chars if self.approx_chars is not None else c.approx_chars,
            (*self.evidence, c.evidence), self.target, self.ignored)


def combine_lengths(lengths: Iterable[Constraint], target: LengthTarget = "body"
                    ) -> LengthRequirement | None:
    """The requirement of ``lengths`` (all of one target), taken in order; None if empty."""
    req: LengthRequirement | None = None
    for c in lengths:
        if req is None:
            req = LengthRequirement(None, None, None, (), target)
        if req.admits(c):
            req = req.plus(c)
        else:
            req = LengthRequirement(req.min_chars, req.max_chars, req.approx_chars, req.evidence,
                                    target, (*req.ignored, c.evidence))
    return req
