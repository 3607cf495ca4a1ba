"""The report's judge agreement and length-controlled leaderboard (issue 28 item 3), as
plain data for the template. Pure: the statistics are ``stats/judge_agreement.py`` and
``stats/length_control.py``; this module picks the rows they read from a run.

Length is the one the score–length slope reads (``bench/stats_tables.essay_lengths``:
Chinese characters; an off-language essay has none and is left out, counted). The genre
is the judgment's cell genre; a prompt that left the genre to the essay is its own group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from essaybench.bench.stats_tables import essay_lengths
from essaybench.core.contracts import OK
from essaybench.stats.judge_agreement import (
    DISAGREEMENTS,
    ESSAY_KEYS,
    disagreements,
    essay_agreement,
    leaderboard_agreement,
)
from essaybench.stats.length_control import LengthControl, length_controlled

CHOICE_GROUP = "choice"  # the group of a prompt without a genre

LENGTH_CONTROL_NOTE = (
    "Length-controlled: each essay's score moved along its genre's length slope to the "
    "genre's mean length (score − slope × (length − genre mean length)), then averaged per "
    "model. The slopes come from one least-squares fit of score on model, genre and length "
    "within each genre, fitted together (as arena-style length control fits style beside "
    "the models), so a slope is how the score moves with length for the same model and a "
    "better model that also writes longer keeps its lead. Length in Chinese characters; "
    "essays not written in Chinese have no length and are left out. Raw mean: the same "
    "essays, unadjusted. A point estimate: no interval.")


@dataclass(frozen=True)
class Disagreement:
    prompt_id: str
    model: str
    sample_index: int
    gap: float  # percentile points between the judges furthest apart
    judges: list[tuple[str, float, float]]  # (judge, score, percentile rank)


@dataclass(frozen=True)
class AgreementView:
    """Between every pair of judges: per essay and per leaderboard (raw and
    length-controlled), and the essays they disagree on most."""

    essays: list[dict[str, Any]]
    boards: list[dict[str, Any]]
    disagreements: list[Disagreement]
    top: int = DISAGREEMENTS


def length_control(ranked: pl.DataFrame, essays: pl.DataFrame) -> LengthControl | None:
    """One judge's length-controlled leaderboard over its ok weighted scores (``ranked``:
    its judgments as the leaderboard counts them); None without a scored essay."""
    keys = list(ESSAY_KEYS)
    lengths = essays.select(*keys, pl.Series("length", essay_lengths(essays),
                                             dtype=pl.Int64))
    rows = (ranked.filter((pl.col("status") == OK) & pl.col("score_weighted").is_not_null())
            .select(*keys, pl.col("genre").cast(pl.Utf8).fill_null(CHOICE_GROUP),
                    pl.col("score_weighted").alias("score"))
            .join(lengths, on=keys, how="left"))
    if rows.height == 0:
        return None
    return length_controlled(rows)


def agreement_view(judgments: pl.DataFrame, raw: dict[str, dict[str, float | None]],
                   controlled: dict[str, dict[str, float | None]]) -> AgreementView | None:
    """Agreement between the run's judges (None with fewer than two). ``raw`` and
    ``controlled``: judge → model → its leaderboard mean, raw and length-controlled."""
    judges = sorted({str(j) for j in judgments["judge"].to_list()})
    if len(judges) < 2:
        return None
    scores = judgments.select(
        "judge", *ESSAY_KEYS,
        pl.when(pl.col("status") == OK).then(pl.col("score_weighted")).alias("score"))
    by_pair = {(r["judge_a"], r["judge_b"]): r
               for r in leaderboard_agreement(controlled).iter_rows(named=True)}
    boards = [{**r, "controlled_rho": by_pair[(r["judge_a"], r["judge_b"])]["spearman_rho"],
               "controlled_n": by_pair[(r["judge_a"], r["judge_b"])]["n_models"]}
              for r in leaderboard_agreement(raw).iter_rows(named=True)]
    listed = [Disagreement(str(r["prompt_id"]), str(r["model"]), int(r["sample_index"] or 0),
                           float(r["gap"]),
                           [(j, float(r[f"score:{j}"]), float(r[f"pct:{j}"])) for j in judges])
              for r in disagreements(scores).iter_rows(named=True)]
    return AgreementView(essay_agreement(scores).to_dicts(), boards, listed)
