"""All the requirements of a prompt: every rule's matches, overlaps resolved."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from essaybench.constraints.model import Constraint
from essaybench.constraints.quantities import find_quantities
from essaybench.constraints.rules import find_phrases


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


def extract_constraints(text: str) -> list[Constraint]:
    """Every requirement found in ``text``, in order of appearance."""
    return _keep_longest([*find_quantities(text), *find_phrases(text)], text)


def binding(constraints: Iterable[Constraint]) -> list[Constraint]:
    """The constraints that make a prompt Constrained."""
    return [c for c in constraints if c.counts_for_set]


def constraints_json(constraints: Iterable[Constraint]) -> str:
    return json.dumps([c.to_json_dict() for c in constraints], ensure_ascii=False)
