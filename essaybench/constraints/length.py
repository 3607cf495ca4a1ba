"""A prompt's length constraints combined into one accepted range of characters."""

from __future__ import annotations

import math
from dataclasses import dataclass

from essaybench.constraints.extract import extract_constraints

APPROX_TOLERANCE = 0.10  # "约800字" accepts 720..880 characters


@dataclass(frozen=True)
class LengthRequirement:
    """All length constraints of a prompt combined: the tightest min and max, the first target."""

    min_chars: int | None
    max_chars: int | None
    approx_chars: int | None
    evidence: tuple[str, ...]

    def bounds(self) -> tuple[int | None, int | None]:
        """Accepted range; a target ``approx_chars`` allows ±APPROX_TOLERANCE."""
        lo, hi = self.min_chars, self.max_chars
        if self.approx_chars is not None:
            a_lo = math.ceil(self.approx_chars * (1 - APPROX_TOLERANCE))
            a_hi = math.floor(self.approx_chars * (1 + APPROX_TOLERANCE))
            lo = a_lo if lo is None else max(lo, a_lo)
            hi = a_hi if hi is None else min(hi, a_hi)
        return lo, hi

    @property
    def conflicting(self) -> bool:
        lo, hi = self.bounds()
        return lo is not None and hi is not None and lo > hi

    def is_met(self, n_chars: int) -> bool:
        lo, hi = self.bounds()
        return (lo is None or n_chars >= lo) and (hi is None or n_chars <= hi)


def length_requirement(text: str) -> LengthRequirement | None:
    lengths = [c for c in extract_constraints(text) if c.kind == "length"]
    if not lengths:
        return None
    mins = [c.min_chars for c in lengths if c.min_chars is not None]
    maxes = [c.max_chars for c in lengths if c.max_chars is not None]
    approx = [c.approx_chars for c in lengths if c.approx_chars is not None]
    return LengthRequirement(max(mins) if mins else None, min(maxes) if maxes else None,
                             approx[0] if approx else None, tuple(c.evidence for c in lengths))
