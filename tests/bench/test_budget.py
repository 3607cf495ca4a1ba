"""The budget check: a cost above the cap, or one that cannot be known, is a problem
named in one line; no cap, or a cost within it, is none."""

from __future__ import annotations

from essaybench.bench.budget import budget_problem, format_usd
from essaybench.bench.estimate_records import Estimate, StageEstimate


def row(model: str, cost_usd: float | None) -> StageEstimate:
    return StageEstimate(model=model, stage="generate", calls=1, input_tokens=10.0,
                         output_tokens=10.0, cost_usd=cost_usd, latency_s=1.0,
                         concurrency_s=1.0, rpm_s=None, tpm_s=None, tokens_from="assumed",
                         latency_from="assumed")


def estimate(*rows: StageEstimate) -> Estimate:
    return Estimate("ps-x", 1, rows, 1.0, ())


def test_a_cost_is_checked_against_the_cap() -> None:
    priced = estimate(row("w", 0.25), row("e", 0.0), row("j", 0.5))
    assert budget_problem(priced, None) is None
    assert budget_problem(priced, 0.75) is None
    assert budget_problem(priced, 0.75 * 1.01) is None
    assert budget_problem(priced, 0.5) == (
        "estimated cost $0.7500 exceeds max_cost_usd $0.5000")


def test_an_unknown_cost_cannot_be_checked() -> None:
    unpriced = estimate(row("w", None), row("j", 0.5), row("w", None))
    assert budget_problem(unpriced, None) is None
    problem = budget_problem(unpriced, 100.0)
    assert problem == ("max_cost_usd $100.00 cannot be checked: the registry has no price "
                       "for w")


def test_usd_is_shown_with_cents_or_four_decimals() -> None:
    assert format_usd(None) == "unknown"
    assert format_usd(0) == "$0.00"
    assert format_usd(1234.5) == "$1,234.50"
    assert format_usd(0.01234) == "$0.0123"
