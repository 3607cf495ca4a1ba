"""How the report writes numbers: the template's filters (``num``, ``pct``, ``cov``,
``signed``) and the drill-down's markup use the same functions."""

from __future__ import annotations

import math

__all__ = ["coverage", "number", "percent", "signed"]


def number(value: object, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def percent(value: object, digits: int = 0) -> str:
    if not isinstance(value, int | float) or math.isnan(value):
        return "—"
    return f"{value:.{digits}%}"


def coverage(value: object) -> str:
    """Floored, so a cell that is not complete never reads as 100% (as Table 5)."""
    if not isinstance(value, int | float) or math.isnan(value):
        return "—"
    return f"{math.floor(value * 100)}%"


def signed(value: object) -> str:
    return "—" if not isinstance(value, int | float) else f"{value:+.2f}"
