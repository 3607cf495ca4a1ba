"""The report's score charts: leaderboard with CIs, forest plot of paired differences,
pairwise win-rate matrix and Bradley–Terry ratings. Each returns an inline ``<svg>``
(see ``svg.py``), or None when there is nothing to draw."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import polars as pl
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure

from essaybench.report.svg import ChartIds, chart_style, fit_margins, inline_svg, text_width_in
from essaybench.report.tables import DiffRow, LeaderRow

ROW_IN = 0.28  # inches per row of a dot chart


def model_colors(models: Sequence[str]) -> dict[str, tuple[float, float, float, float]]:
    """One colour per model, the same in every chart of the page."""
    cmap = colormaps["tab10" if len(models) <= 10 else "tab20"]
    return {m: cmap(i % cmap.N) for i, m in enumerate(sorted(models))}


def hbars(ax: Axes, y: Iterable[float], widths: Iterable[float], *, height: float,
          color: tuple[float, float, float, float]) -> None:
    """Horizontal bars from 0 as one collection, leaving the axes' limits to the caller:
    ``barh`` adds a patch per bar and recomputes the data limits for each, a quarter of a
    15-panel chart's time. A NaN width draws no bar, as with ``barh``."""
    half = height / 2
    verts = [((0.0, yi - half), (w, yi - half), (w, yi + half), (0.0, yi + half))
             for yi, w in zip(y, widths, strict=True) if math.isfinite(w)]
    ax.add_collection(PolyCollection(verts, facecolors=[color], linewidths=0), autolim=False)


def _figure(width: float, rows: int) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(width, max(1.6, 0.8 + ROW_IN * rows)))
    return fig, fig.add_subplot()


def _interval_dots(fig: Figure, ax: Axes, names: list[str], mids: list[float | None],
                   los: list[float | None], his: list[float | None],
                   colors: list[tuple[float, float, float, float]],
                   hollow: list[bool] | None = None) -> None:
    """One row per name (first on top): a dot at ``mid`` and a bar over [lo, hi]."""
    y = np.arange(len(names))[::-1]
    for i, (mid, lo, hi, color) in enumerate(zip(mids, los, his, colors, strict=True)):
        if lo is not None and hi is not None:
            ax.hlines(y[i], lo, hi, color=color, linewidth=2)
        if mid is not None:
            face = "white" if hollow and hollow[i] else color
            ax.plot([mid], [y[i]], "o", color=color, markerfacecolor=face, markersize=6)
    ax.set_yticks(y, names)
    ax.set_ylim(-0.6, len(names) - 0.4)
    ax.grid(axis="x", alpha=0.3)
    fit_margins(fig, names)


def leaderboard_chart(ids: ChartIds, judge: str, rows: list[LeaderRow]) -> str | None:
    if not any(r.mean is not None for r in rows):
        return None
    groups = sorted({r.group for r in rows})
    palette = colormaps["tab10"]
    colors = [palette(groups.index(r.group) % 10) for r in rows]
    with chart_style():
        fig, ax = _figure(6.5, len(rows))
        _interval_dots(fig, ax, [f"{r.rank}. {r.model}" for r in rows], [r.mean for r in rows],
                       [r.lo for r in rows], [r.hi for r in rows], colors)
        ax.set_xlabel("overall weighted score (0–100), 95% CI; colour = group")
        ax.set_title(f"judge {judge}")
        return inline_svg(fig, ids)


def forest_chart(ids: ChartIds, judge: str, baseline: str, rows: list[DiffRow]) -> str | None:
    if not any(r.diff is not None for r in rows):
        return None
    with chart_style():
        fig, ax = _figure(6.5, len(rows))
        colors = [colormaps["tab10"](0 if r.indistinguishable else 3) for r in rows]
        _interval_dots(fig, ax, [r.model for r in rows], [r.diff for r in rows],
                       [r.lo for r in rows], [r.hi for r in rows], colors,
                       hollow=[r.indistinguishable for r in rows])
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_xlabel(f"model − {baseline} (points), paired 95% CI; hollow = indistinguishable")
        ax.set_title(f"judge {judge}: difference to the baseline {baseline}")
        return inline_svg(fig, ids)


def win_matrix(win_rates: pl.DataFrame, judge: str) -> tuple[list[str], np.ndarray]:
    """Models and the matrix of P(row beats column), ties counted half (NaN: no data)."""
    rows = win_rates.filter(pl.col("judge") == judge)
    models = sorted({*rows["model_a"].to_list(), *rows["model_b"].to_list()})
    index = {m: i for i, m in enumerate(models)}
    matrix = np.full((len(models), len(models)), np.nan)
    for a, b, rate in rows.select("model_a", "model_b", "win_rate").iter_rows():
        if rate is not None:
            matrix[index[a], index[b]] = rate
            matrix[index[b], index[a]] = 1 - rate
    return models, matrix


def win_rate_chart(ids: ChartIds, judge: str, win_rates: pl.DataFrame) -> str | None:
    models, matrix = win_matrix(win_rates, judge)
    if not models:
        return None
    size = max(3.0, 0.9 + 0.6 * len(models))
    with chart_style():
        fig = Figure(figsize=(size + 1.0, size + 0.5))
        ax = fig.add_subplot()
        # A vector mesh, not imshow: that would embed a PNG in the SVG.
        ax.pcolormesh(np.ma.masked_invalid(matrix), cmap="RdBu", vmin=0, vmax=1)
        ax.invert_yaxis()
        for (i, j), value in np.ndenumerate(matrix):
            if not math.isnan(value):
                ax.text(j + 0.5, i + 0.5, f"{value:.2f}", ha="center", va="center",
                        fontsize=8)
        ax.set_xticks(np.arange(len(models)) + 0.5, models, rotation=30, ha="right")
        ax.set_yticks(np.arange(len(models)) + 0.5, models)
        ax.set_aspect("equal")
        ax.set_xlabel("column model")
        ax.set_ylabel("row model")
        ax.set_title(f"judge {judge}: P(row beats column), ties count ½; red < ½ < blue")
        longest = max(text_width_in(m, 9) for m in models)
        fit_margins(fig, models, bottom_in=0.6 + 0.5 * longest, right_in=0.3)
        return inline_svg(fig, ids)


def bradley_terry_chart(ids: ChartIds, judge: str, ranking: pl.DataFrame) -> str | None:
    rows = ranking.filter(pl.col("judge") == judge).sort("rank")
    if rows.height == 0:
        return None
    colors = model_colors(rows["model"].to_list())
    # Separated models (issue 16) have no rating: named, with no dot and no bar.
    rated = rows["estimable"].to_list() if "estimable" in rows.columns else [True] * rows.height
    names = [f"{r} {m}" + ("" if ok else " (not estimable)")
             for (r, m), ok in zip(rows.select("rank", "model").iter_rows(), rated, strict=True)]
    with chart_style():
        fig, ax = _figure(6.5, rows.height)
        _interval_dots(fig, ax, names,
                       rows["rating"].to_list(), rows["ci_lo"].to_list(),
                       rows["ci_hi"].to_list(), [colors[m] for m in rows["model"].to_list()])
        ax.set_xlabel("Bradley–Terry rating (400 points = 10:1 odds), 95% CI")
        ax.set_title(f"judge {judge}")
        return inline_svg(fig, ids)
