"""No two public classes of the library share a name: a name says what it is, wherever it
is imported from (``AlignScore``, ``Genre`` and ``Labels`` each named two things)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import essaybench

# The library's own modules, and its flows and tasks (installed in its namespace).
ROOTS = [Path(essaybench.__file__).parent, *(Path(essaybench.__file__).parent / sub
                                               for sub in ("flows", "tasks"))]


def public_classes(root: Path) -> dict[str, list[str]]:
    """Every top-level class not named with a leading underscore, by name -> modules."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.resolve().rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                found[node.name].append(str(path.relative_to(root.resolve().parent)))
    return found


def test_no_two_public_classes_share_a_name() -> None:
    found: dict[str, list[str]] = defaultdict(list)
    for root in ROOTS:
        for name, modules in public_classes(root).items():
            found[name].extend(modules)
    assert len(found) > 100  # the walk saw the library (its symlinked folders too)
    clashes = {name: modules for name, modules in found.items() if len(set(modules)) > 1}
    assert clashes == {}
