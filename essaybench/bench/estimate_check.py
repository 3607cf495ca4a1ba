"""An estimate beside what a run did (``essaybench estimate --check RUN``): per model and
stage, and in total, estimated and actual calls, input and output tokens, cost and wall
time, with their ratio. Pure: the actual figures come from the ledger
(:mod:`essaybench.runs.estimate_check`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from essaybench.bench.estimate_records import Estimate, StageEstimate

# cost_usd: at list prices (the estimate's upper bound); cost_cached_usd: with the prompt
# cache serving repeated prefixes at the cached-input price (the expected cost); both
# against the cost the ledger recorded.
METRICS = ("calls", "input_tokens", "output_tokens", "cost_usd", "cost_cached_usd", "wall_s")
TARGETED = ("calls", "input_tokens", "output_tokens", "cost_cached_usd")


@dataclass(frozen=True)
class Actual:
    """What one (model, stage) of a run did, from its ledger rows."""

    model: str
    stage: str
    calls: int
    input_tokens: float
    output_tokens: float
    cost_usd: float | None  # None: a billed call without a recorded cost
    wall_s: float  # its first call's start to its last call's end


@dataclass(frozen=True)
class CheckRow:
    model: str  # "total" on the last row
    stage: str
    estimated: dict[str, float | None]
    actual: dict[str, float | None]

    def ratio(self, metric: str) -> float | None:
        """estimated ÷ actual; 1 when both are 0; None when either is unknown or only the
        actual is 0."""
        est, act = self.estimated.get(metric), self.actual.get(metric)
        if est is None or act is None:
            return None
        if act == 0:
            return 1.0 if est == 0 else None
        return est / act


@dataclass(frozen=True)
class CheckReport:
    rows: tuple[CheckRow, ...]
    lower_s: float  # the estimate's lower bound on the run's wall time
    wall_s: float | None  # the run's actual wall time (None: no timed call)

    def within(self, factor: float, metrics: Sequence[str] = TARGETED) -> bool:
        """Every known ratio of ``metrics`` within [1/factor, factor], on every row."""
        ratios = [row.ratio(m) for row in self.rows for m in metrics]
        return all(r is None or 1 / factor <= r <= factor for r in ratios)

    @property
    def lower_holds(self) -> bool | None:
        return None if self.wall_s is None else self.lower_s <= self.wall_s

    def lines(self) -> list[str]:
        """The report as plain lines (benchmarks print these)."""
        out = []
        for row in self.rows:
            parts = []
            for metric in METRICS:
                ratio = row.ratio(metric)
                parts.append(f"{metric.removesuffix('_usd').removesuffix('_s')} "
                             f"{_fmt(row.estimated.get(metric))}/{_fmt(row.actual.get(metric))}"
                             f" ({'?' if ratio is None else f'{ratio:.2f}x'})")
            out.append(f"{row.model:>14s} {row.stage:9s} " + ", ".join(parts))
        return out


def _fmt(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.4g}" if value < 1000 else f"{value:,.0f}"


def _estimated(rows: Sequence[StageEstimate]) -> dict[str, float | None]:
    costs = [r.cost_usd for r in rows]
    cached = [r.cost_cached_usd for r in rows]
    return {"calls": sum(r.calls for r in rows),
            "cost_cached_usd": None if None in cached else sum(c or 0.0 for c in cached),
            "input_tokens": sum(r.input_tokens for r in rows),
            "output_tokens": sum(r.output_tokens for r in rows),
            "cost_usd": None if None in costs else sum(c or 0.0 for c in costs),
            "wall_s": max((r.wall_s for r in rows), default=0.0)}


def _actual(rows: Sequence[Actual]) -> dict[str, float | None]:
    costs = [r.cost_usd for r in rows]
    return {"calls": sum(r.calls for r in rows),
            "input_tokens": sum(r.input_tokens for r in rows),
            "output_tokens": sum(r.output_tokens for r in rows),
            "cost_usd": None if None in costs else sum(c or 0.0 for c in costs),
            "wall_s": max((r.wall_s for r in rows), default=0.0)}


def _with_cached(actual: dict[str, float | None]) -> dict[str, float | None]:
    return actual | {"cost_cached_usd": actual["cost_usd"]}


def compare(estimate: Estimate, actual: Sequence[Actual], wall_s: float | None) -> CheckReport:
    """Row by (model, stage), estimated or done; a total; ``wall_s``: the run's wall time."""
    keys = list(dict.fromkeys([(r.model, r.stage) for r in estimate.rows]
                              + [(a.model, a.stage) for a in actual]))
    rows = [CheckRow(model, stage,
                     _estimated([r for r in estimate.rows if (r.model, r.stage) == (model, stage)]),
                     _with_cached(_actual([a for a in actual
                                           if (a.model, a.stage) == (model, stage)])))
            for model, stage in keys]
    total_est = _estimated(estimate.rows) | {"wall_s": estimate.wall_s}
    rows.append(CheckRow("total", "", total_est,
                         _with_cached(_actual(actual)) | {"wall_s": wall_s}))
    return CheckReport(tuple(rows), estimate.lower_s, wall_s)
