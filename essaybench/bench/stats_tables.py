"""The statistics a run's judgments support: every table of the ``stats`` stage.

Pure (no store, no IO): :func:`build_stats_tables` takes the judgments, the essays
(for lengths) and optionally the merged pairwise table, and returns the report tables;
:mod:`essaybench.stages.stats` reads the snapshots and writes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from essaybench.bench.aggregate import genre_choice, has_chosen_genres
from essaybench.bench.compliance import is_off_language
from essaybench.bench.pairwise.tables import position_bias
from essaybench.constraints.counting import IDEOGRAPH_CLASS
from essaybench.stats.bias import length_bias, self_preference
from essaybench.stats.bradley_terry import ranking_table
from essaybench.stats.score_ci import score_cis
from essaybench.stats.winrate import win_rates

VARIANTS = {"score_weighted": "weighted", "score_unweighted": "unweighted",
            "align_total": "align_score"}
ESSAY_KEYS = ("prompt_id", "model", "sample_index")


class StatsParams(BaseModel):
    """How the intervals are computed. Same params + same snapshots → same numbers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n_boot: int = Field(default=2000, ge=100, description="Bootstrap replicates.")
    level: float = Field(default=0.95, gt=0.5, lt=1.0, description="Interval level.")
    seed: int = Field(default=0, description="Seed of every resampling in the stage.")
    baseline: str | None = Field(
        default=None, description="Model whose Bradley–Terry rating is pinned at 1000 "
                                  "(default: ratings centred on 1000).")


def essay_lengths(essays: pl.DataFrame) -> list[int | None]:
    """Each essay's length in Chinese characters, the length the score–length slope and
    the length-controlled ranking read; None for a failed essay and for one not written
    in Chinese (bench/compliance.py: an English essay's 0 Chinese characters are not a
    length, and would pull the slope)."""
    text = essays["essay_text"]
    off = ([bool(v) for v in essays["off_language"].fill_null(False).to_list()]
           if "off_language" in essays.columns else
           [t is not None and is_off_language(t) for t in text.to_list()])
    # count_chinese_chars's class, counted by polars (Rust regex) over the whole column:
    # ~4x the Python count at paper scale, where the report reads the lengths per judge.
    counts = text.str.count_matches(IDEOGRAPH_CLASS).to_list()
    return [None if n is None or foreign else int(n) for n, foreign in zip(counts, off,
                                                                           strict=True)]


def _with_lengths(judgments: pl.DataFrame, essays: pl.DataFrame, score: str) -> pl.DataFrame:
    """The judgments columns length bias reads, with each essay's length beside them."""
    counts = essay_lengths(essays)
    lengths = essays.select(*ESSAY_KEYS).with_columns(
        pl.Series("length_chars", counts, dtype=pl.Int64))
    return (judgments.select(*ESSAY_KEYS, "judge", "genre", "status", score)
            .join(lengths, on=list(ESSAY_KEYS), how="left"))


def build_stats_tables(judgments: pl.DataFrame, essays: pl.DataFrame,
                       pairwise: pl.DataFrame | None, params: StatsParams,
                       family_of: Mapping[str, str], ranked: pl.DataFrame | None = None
                       ) -> dict[str, pl.DataFrame]:
    """Every report table of the stage (pure: no store, no IO). ``ranked``: the judgments
    as the leaderboard counts flagged ones (``bench/flagged_rule.py``), for the score
    intervals and differences; the bias monitors read ``judgments``."""
    tables: dict[str, pl.DataFrame] = {}
    kw: dict[str, Any] = {"n_boot": params.n_boot, "level": params.level, "seed": params.seed}
    scored = judgments if ranked is None else ranked
    for column, variant in VARIANTS.items():
        if column not in scored.columns or scored[column].null_count() == scored.height:
            continue
        cis = score_cis(scored, column, **kw)
        tables[f"score_ci_{variant}"] = cis.cells
        tables[f"score_diff_{variant}"] = cis.pairs
    if "score_weighted" in judgments.columns and judgments.height:
        with_lengths = _with_lengths(judgments, essays, "score_weighted")
        tables["length_bias"] = length_bias(with_lengths, "score_weighted")
        tables["self_preference"] = self_preference(judgments, family_of, "score_weighted", **kw)
    if has_chosen_genres(judgments):
        # Which cells mix prompt-decided and essay-chosen genres (open/multi prompts).
        tables["genre_choice"] = genre_choice(judgments)
    if pairwise is not None and pairwise.height:
        tables["win_rates"] = win_rates(pairwise, baseline=params.baseline, **kw)
        tables["bradley_terry"] = ranking_table(pairwise, anchor=params.baseline, **kw)
        tables["position_bias"] = position_bias(pairwise)
    return tables


def main_table(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The snapshot's table: every score CI cell, one ``variant`` column."""
    frames = [df.select(pl.lit(name.removeprefix("score_ci_")).alias("variant"), pl.all())
              for name, df in tables.items() if name.startswith("score_ci_")]
    return pl.concat(frames) if frames else pl.DataFrame(schema={"variant": pl.Utf8})
