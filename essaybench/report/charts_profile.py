"""The report's profile charts: trait profiles (per model; per genre × Open/Constrained),
score against length per judge, and length compliance per model. Each returns an inline
``<svg>`` (see ``svg.py``), or None when there is nothing to draw."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from essaybench.core.contracts import GENRES, PROMPT_SETS
from essaybench.report.charts import hbars, model_colors
from essaybench.report.labels import Labels
from essaybench.report.svg import (
    ChartIds,
    chart_style,
    cjk_font,
    fit_margins,
    inline_svg,
    label,
)

PANELS_PER_ROW = 4
TRAIT_ROW_IN = 0.17  # inches per trait row
# Past this many essays the scatter draws a seeded sample (its title says so): 10,920
# points at the paper's scale were 1.5 MB of the page and a third of a second to draw, and
# no reader tells them apart. The OLS line is the stats stage's, fitted on every essay.
SCATTER_MAX_POINTS = 2000
SCATTER_SEED = 0


def _trait_order(traits: pl.DataFrame, labels: Labels) -> list[tuple[str, str]]:
    """(genre, trait id) in the paper's genre order, then the rubric's trait order."""
    pairs = set(traits.select("genre", "trait").iter_rows())
    genre_rank = {g: i for i, g in enumerate(GENRES)}

    def key(pair: tuple[str, str]) -> tuple[int, str, int, str]:
        found = labels.traits.get(pair[1])
        return (genre_rank.get(pair[0], len(GENRES)), pair[0],
                found.order if found else 0, pair[1])

    return sorted(pairs, key=key)


def _short(genre: str, labels: Labels) -> str:
    """A genre's tag on a trait label: its Chinese name when it can be drawn."""
    zh = labels.genre_zh(genre)
    return zh if zh and cjk_font() is not None else genre[:4]


def _per_question(traits: pl.DataFrame, labels: Labels) -> pl.DataFrame:
    values = [labels.per_question(t, m) for t, m in traits.select("trait", "mean").iter_rows()]
    return traits.with_columns(pl.Series("score", values, dtype=pl.Float64))


def trait_profile_chart(ids: ChartIds, judge: str, traits: pl.DataFrame,
                        labels: Labels) -> str | None:
    """Small multiples, one panel per model: its mean per trait (every genre's traits)."""
    rows = _per_question(traits.filter(pl.col("judge") == judge), labels)
    if rows.height == 0:
        return None
    models = sorted({str(m) for m in rows["model"].to_list()})
    order = _trait_order(rows, labels)
    colors = model_colors(models)
    ncols = min(PANELS_PER_ROW, len(models))
    nrows = math.ceil(len(models) / ncols)
    y = np.arange(len(order))[::-1]
    with chart_style():
        fig = Figure(figsize=(2.0 + 1.9 * ncols, nrows * (0.7 + TRAIT_ROW_IN * len(order))))
        # Not shared axes: a shared y axis draws its 24-odd ticks in every panel, most of
        # the chart's time; each panel gets the same limits, ticks only at the outer edge.
        axes = fig.subplots(nrows, ncols, squeeze=False)
        x_max = (10.0 if labels.traits  # the rubric's scale; else the largest trait sum
                 else max(1.0, float(rows.select(pl.col("score").fill_nan(None).max()).item()
                                     or 0.0) * 1.05))
        for k, ax in enumerate(axes.flat):
            if k >= len(models):
                ax.set_visible(False)
                continue
            if k % ncols:
                ax.set_yticks([])
            if k + ncols < len(models):  # a panel below it draws the x axis
                ax.set_xticks([])
            ax.set_ylim(-0.6, len(order) - 0.4)
            mine = {(g, t): s for g, t, s in rows.filter(pl.col("model") == models[k])
                    .select("genre", "trait", "score").iter_rows()}
            values = [mine.get(pair, np.nan) for pair in order]
            hbars(ax, y, values, color=colors[models[k]], height=0.7)
            for i in range(1, len(order)):  # a line between genres
                if order[i][0] != order[i - 1][0]:
                    ax.axhline(y[i] + 0.5, color="grey", linewidth=0.5)
            ax.set_title(models[k], fontsize=9)
            ax.set_xlim(0, x_max)
        names = [f"{_short(g, labels)} · {labels.trait(t)}" for g, t in order]
        for row in axes[:, 0]:
            row.set_yticks(y, names, fontsize=6.5)
        fig.supxlabel("mean per sub-question (1–10)" if labels.traits else "mean trait sum",
                      fontsize=8)
        fit_margins(fig, names, 6.5, top_in=0.3, bottom_in=0.55)
        fig.subplots_adjust(hspace=0.35 / (TRAIT_ROW_IN * len(order)), wspace=0.08)
        return inline_svg(fig, ids)


def trait_cells_chart(ids: ChartIds, judge: str, cell_traits: pl.DataFrame,
                      labels: Labels) -> str | None:
    """One panel per genre × prompt set: each model's mean per trait (``cell_traits`` is
    ``trait_means`` over judgments whose genre is ``<genre>/<prompt_set>``)."""
    rows = _per_question(cell_traits.filter(pl.col("judge") == judge), labels)
    if rows.height == 0:
        return None
    rows = rows.with_columns(pl.col("genre").str.split_exact("/", 1)
                             .struct.rename_fields(["g", "s"])).unnest("genre")
    genres = [g for g in GENRES if g in set(rows["g"].to_list())] + sorted(
        set(rows["g"].to_list()) - set(GENRES))
    sets = [s for s in PROMPT_SETS if s in set(rows["s"].to_list())]
    models = sorted({str(m) for m in rows["model"].to_list()})
    colors = model_colors(models)
    offsets = np.linspace(-0.25, 0.25, len(models)) if len(models) > 1 else np.zeros(1)
    with chart_style():
        fig = Figure(figsize=(3.2 * len(sets) + 1.8, 1.5 * len(genres) + 0.9))
        # A row is one genre: its traits label the first panel only.
        axes = fig.subplots(len(genres), len(sets), sharex=True, sharey="row", squeeze=False)
        names: list[str] = []
        score = {(g, s, m, t): v for g, s, m, t, v
                 in rows.select("g", "s", "model", "trait", "score").iter_rows()}
        for gi, genre in enumerate(genres):
            of_genre = rows.filter(pl.col("g") == genre)
            order = [t for _, t in _trait_order(of_genre.rename({"g": "genre"}), labels)]
            y = np.arange(len(order))[::-1]
            for si, pset in enumerate(sets):
                ax = axes[gi, si]
                # every model's points in one collection (one artist per model was most
                # of the chart's time at 15 models)
                ax.scatter([score.get((genre, pset, m, t), np.nan)
                            for m in models for t in order],
                           [yi + offset for offset in offsets for yi in y],
                           c=[colors[m] for m in models for _ in order], s=16)
                ax.set_title(f"{label(genre, labels.genre_zh(genre))} / {pset}", fontsize=8)
                ax.grid(axis="x", alpha=0.3)
            names += [labels.trait(t) for t in order]
            axes[gi, 0].set_yticks(y, [labels.trait(t) for t in order], fontsize=6.5)
            axes[gi, 0].set_ylim(-0.6, len(order) - 0.4)
        handles = [Line2D([], [], marker="o", linestyle="", color=colors[m], markersize=4)
                   for m in models]
        fig.legend(handles, models, loc="upper center", ncols=min(len(models), 5), fontsize=7,
                   frameon=False)
        # the legend: five models a row, above the panels
        fit_margins(fig, names, 6.5, top_in=0.4 + 0.15 * math.ceil(len(models) / 5),
                    bottom_in=0.35)
        fig.subplots_adjust(hspace=0.45, wspace=0.05)
        return inline_svg(fig, ids)


def length_scatter_chart(ids: ChartIds, judge: str, points: pl.DataFrame,
                         fit: tuple[float, float] | None,
                         max_points: int = SCATTER_MAX_POINTS) -> str | None:
    """Score against length (``points``: model, length_chars, score) for ``judge``; the
    stats stage's OLS line (slope per 100 characters, intercept) when given. Past
    ``max_points`` essays, a seeded sample of that many is drawn and the title says so."""
    if points.height == 0:
        return None
    colors = model_colors(sorted({str(m) for m in points["model"].to_list()}))
    title, x_max = f"judge {judge}", float(points["length_chars"].to_numpy().max())
    if points.height > max_points:
        title += f": a seeded sample of {max_points:,} of {points.height:,} essays"
        points = points.sample(n=max_points, seed=SCATTER_SEED)
    with chart_style():
        fig = Figure(figsize=(6.5, 3.6))
        ax = fig.add_subplot()
        for model, color in colors.items():
            mine = points.filter(pl.col("model") == model)
            ax.scatter(mine["length_chars"].to_numpy(), mine["score"].to_numpy(), s=14,
                       color=color, alpha=0.75, label=model)
        if fit is not None:
            slope, intercept = fit
            xs = np.array([0.0, x_max])
            ax.plot(xs, intercept + slope * xs / 100, color="black", linewidth=1,
                    label=f"OLS: {slope:+.2f} points / 100 chars")
        ax.set_xlabel("essay length (Chinese characters)")
        ax.set_ylabel("weighted score (0–100)")
        ax.set_title(title)
        ax.legend(fontsize=7)
        fit_margins(fig, ["100"], bottom_in=0.55)
        return inline_svg(fig, ids)


def compliance_chart(ids: ChartIds, facts: pl.DataFrame) -> str | None:
    """Per model: shares of checked essays compliant, over and under length."""
    rows = facts.filter(pl.col("n_checked") > 0)
    if rows.height == 0:
        return None
    models = rows["model"].to_list()
    y = np.arange(len(models))[::-1]
    with chart_style():
        fig = Figure(figsize=(6.5, max(1.6, 0.8 + 0.3 * len(models))))
        ax = fig.add_subplot()
        left = np.zeros(len(models))
        for column, color, name in (("compliance_rate", "#4c9f70", "compliant"),
                                    ("over_rate", "#e0a030", "over"),
                                    ("under_rate", "#c8553d", "under")):
            share = rows[column].fill_null(0.0).to_numpy()
            ax.barh(y, share, left=left, color=color, label=name, height=0.6)
            left += share
        ax.set_yticks(y, models)
        ax.set_xlim(0, 1)
        ax.set_xlabel("share of essays with a length requirement")
        fit_margins(fig, models, bottom_in=0.55, top_in=0.35)
        ax.legend(fontsize=7, ncols=3, loc="lower right", bbox_to_anchor=(1, 1), frameon=False)
        return inline_svg(fig, ids)
