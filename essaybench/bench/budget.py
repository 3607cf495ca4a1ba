"""A run's estimated cost against its config's cap (``max_cost_usd``), and USD as shown.

An unknown cost (a model without prices) never passes a cap: it cannot be checked."""

from __future__ import annotations

from essaybench.bench.estimate_records import Estimate


def budget_problem(estimate: Estimate, max_cost_usd: float | None) -> str | None:
    """Why the estimate does not fit ``max_cost_usd`` (None: it fits, or there is no cap)."""
    if max_cost_usd is None:
        return None
    cost = estimate.cost_usd
    if cost is None:
        return (f"max_cost_usd {format_usd(max_cost_usd)} cannot be checked: the registry "
                f"has no price for {', '.join(estimate.unpriced)}")
    if cost > max_cost_usd:
        return f"estimated cost {format_usd(cost)} exceeds max_cost_usd {format_usd(max_cost_usd)}"
    return None


def format_usd(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"${value:,.2f}" if value >= 1 or value == 0 else f"${value:.4f}"
