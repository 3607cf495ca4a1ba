"""All the requirements of a prompt: every rule's matches, overlaps resolved, lengths
given their targets.

The rules read ``matching_text(text)`` (traditional characters as simplified ones, offset
for offset); evidence and given titles are then cut from the original text at the
same spans, so a record always quotes what the prompt says.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable

from essaybench.constraints.model import Constraint
from essaybench.constraints.quantities import find_quantities
from essaybench.constraints.rules import find_phrases
from essaybench.constraints.targets import assign_targets
from essaybench.core.matching import matching_text


def _keep_longest(found: list[Constraint], text: str) -> list[Constraint]:
    quoted = [m.span() for m in re.finditer(r"《[^》\n]{1,40}》", text)]
    titles = [c.span for c in found if c.kind == "title" and c.value is not None]
    shelter = quoted + titles
    kept: list[Constraint] = []
    for c in sorted(found, key=lambda c: (c.span[0], -(c.span[1] - c.span[0]))):
        if c.kind != "title" and any(a <= c.span[0] and c.span[1] <= b for a, b in shelter):
            continue
        if any(k.kind == c.kind and k.span[0] < c.span[1] and c.span[0] < k.span[1] for k in kept):
            continue  # the same requirement seen by two rules: keep the longer, earlier match
        kept.append(c)
    return kept


def _in_original(c: Constraint, text: str) -> Constraint:
    a, b = c.span
    evidence = text[a:b]
    if evidence == c.evidence:
        return c

    def original(at: int, part: str) -> str:
        return evidence[at:at + len(part)]

    # a given title opens its evidence (以《X》为题), a counted thing closes it (写十条评语)
    value = None if c.value is None else original(c.evidence.index(c.value), c.value)
    target = (original(c.evidence.rindex(c.target), c.target)
              if c.kind == "count" and c.target is not None else c.target)
    return dataclasses.replace(c, evidence=evidence, value=value, target=target)


def extract_constraints(text: str) -> list[Constraint]:
    """Every requirement found in ``text``, in order of appearance."""
    matched = matching_text(text)
    found = assign_targets(_keep_longest([*find_quantities(matched), *find_phrases(matched)],
                                         matched))
    return found if matched == text else [_in_original(c, text) for c in found]


def binding(constraints: Iterable[Constraint]) -> list[Constraint]:
    """The constraints that make a prompt Constrained."""
    return [c for c in constraints if c.counts_for_set]


def constraints_json(constraints: Iterable[Constraint]) -> str:
    return json.dumps([c.to_json_dict() for c in constraints], ensure_ascii=False)
