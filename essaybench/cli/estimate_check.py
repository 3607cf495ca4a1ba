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

COLUMNS = (("calls", "calls"), ("input_tokens", "in tok"), ("output_tokens", "out tok"),
           ("cost_usd", "USD"), ("wall_s", "wall"))


def _value(metric: str, value: float | None) -> str:
    from essaybench.bench.budget import format_usd
    from essaybench.cli.estimate import format_tokens

    if value is None:
        return "?"
    if metric == "cost_usd":
        return format_usd(value)
    if metric == "wall_s":
        return duration(value)
    return format_tokens(value) if metric != "calls" else f"{value:,.0f}"


def print_check(report: CheckReport, run: str) -> None:
    table = Table(title=f"Estimate / actual of run {run} (ratio = estimate ÷ actual)",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column("model", overflow="fold")
    table.add_column("stage", no_wrap=True)
    for _, name in COLUMNS:
        table.add_column(name, justify="right", overflow="fold")
    for i, row in enumerate(report.rows):
        if i == len(report.rows) - 1:
            table.add_section()
        cells = []
        for metric, _ in COLUMNS:
            ratio = row.ratio(metric)
            cells.append(f"{_value(metric, row.estimated.get(metric))}/"
                         f"{_value(metric, row.actual.get(metric))} "
                         f"{'?' if ratio is None else f'{ratio:.2f}x'}")
        table.add_row(row.model, row.stage, *cells,
                      style="bold" if i == len(report.rows) - 1 else None)
    console.print(table)
    holds = report.lower_holds
    verdict = ("no timed call" if holds is None else "holds" if holds else
               "VIOLATED: the run was faster than its lower bound")
    console.print(f"wall time: lower bound {duration(report.lower_s)}, actual "
                  f"{'?' if report.wall_s is None else duration(report.wall_s)} ({verdict})",
                  markup=False)
