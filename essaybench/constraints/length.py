"""A prompt's length requirements, one per target; the essay's own is the body's."""

from __future__ import annotations

from essaybench.constraints.extract import extract_constraints
from essaybench.constraints.model import LENGTH_TARGETS, LengthTarget
from essaybench.constraints.requirement import APPROX_TOLERANCE, LengthRequirement, combine_lengths

__all__ = ["APPROX_TOLERANCE", "LengthRequirement", "length_requirement", "length_requirements"]


def length_requirements(text: str) -> dict[LengthTarget, LengthRequirement]:
    """Every target the prompt states a length for, with its combined requirement."""
    lengths = [c for c in extract_constraints(text) if c.kind == "length"]
    out: dict[LengthTarget, LengthRequirement] = {}
    for target in LENGTH_TARGETS:
        req = combine_lengths((c for c in lengths if c.target == target), target)
        if req is not None:
            out[target] = req
    return out


def length_requirement(text: str) -> LengthRequirement | None:
    """The essay body's length requirement (what length compliance checks), or None.

    A title's, a summary's or another piece's length (题目不超过10个字, 50字以内的摘要)
    is not the essay's and never narrows it."""
    return length_requirements(text).get("body")
