"""Named SQL statements, one per file in the project's ``sql/`` folder."""

from __future__ import annotations

from functools import cache

from essaybench.core.paths import resource


@cache
def statement(name: str) -> str:
    path = resource("sql") / f"{name}.sql"
    if not path.is_file():
        raise FileNotFoundError(f"SQL statement {name!r} not found: {path}")
    return path.read_text(encoding="utf-8")
