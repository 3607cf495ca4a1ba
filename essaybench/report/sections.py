"""The report's score sections per judge: leaderboard, Table 5 heatmaps, paired differences
to a baseline, trait profiles, score–length, and pairwise results. Plain data for the
template (which escapes every string); charts are inline SVG drawn here."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import polars as pl
from matplotlib import colormaps
from matplotlib.colors import Normalize

from essaybench.bench.aggregate import (
    CHOSEN,
    CHOSEN_NOTE,
    has_repeats,
    judge_repeats,
    table5,
    trait_means,
)
from essaybench.bench.flagged_rule import (
    SECOND_OPINION_NOTE,
    mark,
    ranked_judgments,
    second_opinion_table,
)
from essaybench.bench.stats_tables import essay_lengths
from essaybench.core.contracts import OK, OVERALL
from essaybench.report.agreement import length_control
from essaybench.report.charts import (
    bradley_terry_chart,
    forest_chart,
    leaderboard_chart,
    win_rate_chart,
)
from essaybench.report.charts_profile import (
    length_scatter_chart,
    trait_cells_chart,
    trait_profile_chart,
)
from essaybench.report.data import RunData
from essaybench.report.labels import Labels
from essaybench.report.svg import ChartIds
from essaybench.report.tables import DiffRow, LeaderRow, diffs_to, leaderboard
from essaybench.stats.length_control import LengthControl

HEAT_CMAP = "YlGnBu"


@dataclass(frozen=True)
class HeatCell:
    mean: float | None
    coverage: float | None
    n: int
    background: str
    foreground: str
    chosen: int = 0  # of the cell's judgments, essays placed by the genre they chose


@dataclass(frozen=True)
class HeatTable:
    title: str
    columns: list[tuple[str, str | None]]  # (cell, Chinese genre name)
    rows: list[tuple[str, list[HeatCell]]]  # (model, cells)

    @property
    def chosen_note(self) -> str | None:
        """What "k chosen" means, when a cell holds essays placed by the genre they chose."""
        return CHOSEN_NOTE if any(c.chosen for _, row in self.rows for c in row) else None


@dataclass
class JudgeSection:
    judge: str
    leaderboard: list[LeaderRow]
    leaderboard_svg: str | None
    heatmaps: list[HeatTable]
    baseline: str | None
    diffs: list[DiffRow]
    forest_svg: str | None
    trait_svg: str | None
    trait_cells_svg: str | None
    scatter_svg: str | None
    length_bias: list[dict[str, object]] = field(default_factory=list)
    win_rate_svg: str | None = None
    bt_svg: str | None = None
    bradley_terry: list[dict[str, object]] = field(default_factory=list)
    # per model with flagged judgments: the second judge's opinion beside the first's
    second_opinions: list[dict[str, object]] = field(default_factory=list)
    flagged_note: str = ""  # the run's flagged_essays rule, in words
    # judge.repeats: per model, the spread of the repeated judgments (aggregate.judge_repeats)
    repeats: list[dict[str, object]] = field(default_factory=list)
    # scored essays not written in Chinese: left out of the score–length chart (no length)
    off_language_points: int = 0
    # the leaderboard adjusted for essay length (report/agreement.py), beside the raw one
    length_control: LengthControl | None = None


def _hex(rgba: tuple[float, float, float, float]) -> str:
    return "#" + "".join(f"{round(c * 255):02x}" for c in rgba[:3])


def heat_table(t5: pl.DataFrame, title: str, labels: Labels) -> HeatTable:
    """Table 5 (one judge) with a background colour per mean, scaled over the table."""
    names = [OVERALL, *(c for c in t5.columns if "/" in c and ":" not in c)]
    means = [v for c in names for v in t5[c].drop_nulls().to_list()]
    norm = Normalize(min(means, default=0.0), max(means, default=100.0) or 1.0)
    cmap = colormaps[HEAT_CMAP]
    rows = []
    for r in t5.iter_rows(named=True):
        row = []
        for c in names:
            mean = r[c]
            rgba = cmap(norm(mean)) if mean is not None else (0.93, 0.93, 0.93, 1.0)
            luminance = 0.299 * rgba[0] + 0.587 * rgba[1] + 0.114 * rgba[2]
            row.append(HeatCell(mean, r[f"{c}:coverage"], int(r[f"{c}:n"] or 0), _hex(rgba),
                                "#ffffff" if luminance < 0.5 else "#111111",
                                int(r.get(f"{c}:{CHOSEN}") or 0)))
        rows.append((str(r["model"]), row))
    columns = [(c, labels.genre_zh(c.split("/", 1)[0]) if "/" in c else None) for c in names]
    return HeatTable(title, columns, rows)


def _length_points(data: RunData, judge: str) -> pl.DataFrame:
    """Each ok judgment's weighted score beside its essay's length in Chinese characters
    (the length the stats stage's slope is fitted on); an off-language essay's length is
    null (``bench/stats_tables.essay_lengths``), not 0."""
    keys = ["prompt_id", "model", "sample_index"]
    lengths = data.essays.select(*keys, pl.Series(
        "length_chars", essay_lengths(data.essays), dtype=pl.Int64))
    return (data.judgments.filter((pl.col("judge") == judge) & (pl.col("status") == OK)
                                  & pl.col("score_weighted").is_not_null())
            .select(*keys, pl.col("score_weighted").alias("score"))
            .join(lengths, on=keys, how="inner"))


def _rows(table: pl.DataFrame | None, judge: str) -> list[dict[str, object]]:
    return [] if table is None else table.filter(pl.col("judge") == judge).to_dicts()


def _fit(length_bias: list[dict[str, object]]) -> tuple[float, float] | None:
    row = next((r for r in length_bias if r["genre"] == "all"), None)
    if row is None or row["slope_per_100"] is None or row["intercept"] is None:
        return None
    return float(row["slope_per_100"]), float(row["intercept"])  # type: ignore[arg-type]


def judge_section(ids: ChartIds, data: RunData, judge: str, labels: Labels) -> JudgeSection:
    mine = data.judgments.filter(pl.col("judge") == judge)
    # the leaderboard's scores: flagged judgments counted by the run's rule
    ranked = ranked_judgments(mine, data.flagged_rule)
    second = second_opinion_table(mine, data.flagged_rule).to_dicts()
    marks = {str(r["model"]): mark(r) for r in second}
    board = [replace(r, flagged=marks.get(r.model, ""))
             for r in leaderboard(judge, ranked, data.stats)]
    baseline = board[0].model if board and board[0].mean is not None else None
    diffs = diffs_to(judge, baseline, [r.model for r in board], data.stats) if baseline else []
    by_cell = mine.with_columns((pl.col("genre") + "/" + pl.col("prompt_set")).alias("genre"))
    length_bias = _rows(data.stats.get("length_bias"), judge)
    points = _length_points(data, judge)
    plotted = points.filter(pl.col("length_chars").is_not_null())
    section = JudgeSection(
        judge=judge, leaderboard=board, leaderboard_svg=leaderboard_chart(ids, judge, board),
        heatmaps=[heat_table(table5(ranked if column == "score_weighted" else mine, column),
                             title, labels) for column, title in (
            ("score_weighted", "weighted (W_t = α^d)"), ("score_unweighted", "w/o WT"))],
        baseline=baseline, diffs=diffs,
        forest_svg=forest_chart(ids, judge, baseline, diffs) if baseline else None,
        trait_svg=trait_profile_chart(ids, judge, trait_means(mine), labels),
        trait_cells_svg=trait_cells_chart(ids, judge, trait_means(by_cell), labels),
        scatter_svg=length_scatter_chart(ids, judge, plotted, _fit(length_bias)),
        off_language_points=points.height - plotted.height,
        length_bias=length_bias, second_opinions=second,
        flagged_note=f"{data.flagged_rule}: {SECOND_OPINION_NOTE[data.flagged_rule]}",
        repeats=judge_repeats(mine).to_dicts() if has_repeats(mine) else [],
        length_control=length_control(ranked, data.essays))
    if data.pairwise is not None and "win_rates" in data.stats:
        section.win_rate_svg = win_rate_chart(ids, judge, data.stats["win_rates"])
    if data.pairwise is not None and "bradley_terry" in data.stats:
        section.bt_svg = bradley_terry_chart(ids, judge, data.stats["bradley_terry"])
        section.bradley_terry = _rows(data.stats["bradley_terry"], judge)
    return section
