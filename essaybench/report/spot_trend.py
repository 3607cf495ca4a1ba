"""The report's judge–human agreement trend: every imported weekly spot check
(``<store>/spotcheck/*/agreement.parquet``, docs/spot-checks.md) up to this run's week, as
a table and a line chart (Spearman ρ, Kendall τ, quadratic κ per week)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from matplotlib.figure import Figure

from essaybench.bench.spot.trend import trend
from essaybench.report.svg import ChartIds, chart_style, fit_margins, inline_svg

SERIES = (("spearman", "Spearman ρ (essays)", "#1f77b4"),
          ("kendall", "Kendall τ (essays)", "#ff7f0e"),
          ("question_kappa_quadratic", "κ quadratic (sub-questions)", "#2ca02c"))


@dataclass(frozen=True)
class SpotTrend:
    rows: list[dict[str, Any]]
    svg: str | None


def trend_chart(ids: ChartIds, table: pl.DataFrame) -> str | None:
    """One line per agreement figure over the weeks; None with fewer than two weeks."""
    if table["week"].n_unique() < 2:
        return None
    labels = [f"{w}\n{r}" for w, r in table.select("week", "run_id").iter_rows()]
    x = list(range(table.height))
    with chart_style():
        fig = Figure(figsize=(6.5, 2.6))
        ax = fig.add_subplot()
        for column, name, color in SERIES:
            ax.plot(x, table[column].to_list(), marker="o", color=color, label=name)
        ax.set_xticks(x, labels, fontsize=7)
        ax.set_ylim(-1, 1)
        ax.axhline(0, color="#999", linewidth=0.5)
        fit_margins(fig, ["-1.0"], bottom_in=0.6, top_in=0.35)
        ax.legend(fontsize=7, ncols=3, loc="lower right", bbox_to_anchor=(1, 1), frameon=False)
        return inline_svg(fig, ids)


def spot_trend_view(store_root: Path | str, run_id: str, ids: ChartIds) -> SpotTrend | None:
    """The trend up to ``run_id``'s row (every row when this run has none); None when no
    spot check was imported."""
    table = trend(Path(store_root) / "spotcheck")
    if table.is_empty():
        return None
    if run_id in table["run_id"].to_list():
        week = table.filter(pl.col("run_id") == run_id)["week"][0]
        table = table.filter(pl.col("week") <= week)
    return SpotTrend(table.to_dicts(), trend_chart(ids, table))
