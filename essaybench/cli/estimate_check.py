"""``essaybench estimate --check RUN``: the estimate beside what the run did, per model and
stage, each figure as estimated / actual and their ratio."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.table import Table

from essaybench.cli.common import console
from essaybench.llm.progress import duration

if TYPE_CHECKING:
    from essaybench.bench.estimate_check import CheckReport

METRICS = (("calls", "calls"), ("input_tokens", "input tokens"),
           ("output_tokens", "output tokens"), ("cost_usd", "USD list"),
           ("cost_cached_usd", "USD cached"), ("wall_s", "wall time"))


def _value(metric: str, value: float | None) -> str:
    from essaybench.bench.budget import format_usd

    if value is None:
        return "?"
    if metric.startswith("cost"):
        return format_usd(value)
    if metric == "wall_s":
        return duration(value)
    if metric != "calls" and value >= 1e4:  # as the estimate's table shows tokens
        return f"{value / 1e6:.1f}M" if value >= 1e6 else f"{value / 1e3:.1f}k"
    return f"{value:,.0f}"


def print_check(report: CheckReport, run: str) -> None:
    """One line per model, stage and figure: estimated, actual, their ratio."""
    table = Table(title=f"Estimate against run {run}", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    table.add_column("model", overflow="fold")
    table.add_column("stage", no_wrap=True)
    table.add_column("figure", no_wrap=True)
    for name in ("estimated", "actual", "est÷act"):
        table.add_column(name, justify="right", no_wrap=True)
    for i, row in enumerate(report.rows):
        total = i == len(report.rows) - 1
        if i:
            table.add_section()
        for j, (metric, name) in enumerate(METRICS):
            ratio = row.ratio(metric)
            if total and metric == "wall_s":
                name = "wall time ~"  # the expected value; the lower bound is below
            table.add_row(row.model if j == 0 else "", row.stage if j == 0 else "", name,
                          _value(metric, row.estimated.get(metric)),
                          _value(metric, row.actual.get(metric)),
                          "?" if ratio is None else f"{ratio:.2f}x",
                          style="bold" if total else None)
    console.print(table)
    holds = report.lower_holds
    verdict = ("no timed call" if holds is None else "holds" if holds else
               "VIOLATED: the run was faster than its lower bound")
    console.print(f"wall time: lower bound {duration(report.lower_s)}, actual "
                  f"{'?' if report.wall_s is None else duration(report.wall_s)} ({verdict})",
                  markup=False)
