"""Voting-based scores and rankings from pairwise annotations (the EssayBench protocol).

1. Each annotated pair of one prompt becomes one outcome by majority vote:
   the verdict more than half of its annotators gave; a tie when no verdict
   has such a majority (e.g. A / B / tie from three annotators).
2. A model's voting score = (wins + 0.5 · ties) / comparisons over the
   outcomes it took part in; ranked from the highest score (rank 1).
3. Judge-vs-human agreement (:mod:`essaybench.human.matched`): Spearman ρ and
   Kendall τ between the human voting scores and the judge's per-model mean score,
   on the annotated essays only.

Pairs are stored in a canonical orientation (``model_a`` < ``model_b``
alphabetically, verdict flipped where the row had them the other way round), so
(m1, m2, "A") and (m2, m1, "B") are the same vote. The same functions turn a
judge's own pairwise verdicts into voting scores.
"""

from __future__ import annotations

import math

import polars as pl

from essaybench.human.agreement import (
    Correlation,
    FleissKappa,
    fleiss_kappa_long,
    kendall,
    spearman,
)
from essaybench.human.annotations import require_columns

OVERALL = "overall"
MIN_MODELS = 3  # a rank correlation over fewer models means nothing


def canonical_pairs(annotations: pl.DataFrame) -> pl.DataFrame:
    """The annotations with ``model_a`` < ``model_b`` and the verdict flipped to match."""
    require_columns(annotations, ["prompt_id", "model_a", "model_b", "annotator", "verdict"],
                    "pairwise annotations")
    bad = annotations.filter(~pl.col("verdict").is_in(["A", "B", "tie"]))
    if not bad.is_empty():
        raise ValueError(f"pairwise annotations: verdicts must be A, B or tie, got "
                         f"{sorted(set(bad['verdict'].cast(pl.Utf8).to_list()))}")
    swap = pl.col("model_a") > pl.col("model_b")
    flipped = (pl.when(pl.col("verdict") == "A").then(pl.lit("B"))
               .when(pl.col("verdict") == "B").then(pl.lit("A")).otherwise(pl.lit("tie")))
    df = with_sample_index(annotations)
    if "genre" not in df.columns:
        df = df.with_columns(pl.lit(None, dtype=pl.Utf8).alias("genre"))
    return df.with_columns(
        pl.when(swap).then(pl.col("model_b")).otherwise(pl.col("model_a")).alias("model_a"),
        pl.when(swap).then(pl.col("model_a")).otherwise(pl.col("model_b")).alias("model_b"),
        pl.when(swap).then(flipped).otherwise(pl.col("verdict")).alias("verdict"))


def with_sample_index(annotations: pl.DataFrame) -> pl.DataFrame:
    """``annotations`` with a ``sample_index`` column (0, the first sample, where absent)."""
    if "sample_index" in annotations.columns:
        return annotations.with_columns(pl.col("sample_index").fill_null(0).cast(pl.Int64))
    return annotations.with_columns(pl.lit(0, dtype=pl.Int64).alias("sample_index"))


def pairwise_fleiss(annotations: pl.DataFrame) -> FleissKappa:
    """Fleiss' κ of the annotators' verdicts (A / B / tie), one item per prompt × sample ×
    pair."""
    return fleiss_kappa_long(canonical_pairs(annotations),
                             items=["prompt_id", "sample_index", "model_a", "model_b"],
                             label="verdict")


def majority_votes(annotations: pl.DataFrame) -> pl.DataFrame:
    """One row per prompt × sample × pair: vote counts and the majority ``outcome``
    (A, B or tie)."""
    df = canonical_pairs(annotations)
    votes = (df.group_by("prompt_id", "sample_index", "model_a", "model_b")
             .agg(pl.col("genre").drop_nulls().first(),
                  pl.len().cast(pl.Int64).alias("n_votes"),
                  (pl.col("verdict") == "A").sum().cast(pl.Int64).alias("votes_a"),
                  (pl.col("verdict") == "B").sum().cast(pl.Int64).alias("votes_b"),
                  (pl.col("verdict") == "tie").sum().cast(pl.Int64).alias("votes_tie")))
    half = pl.col("n_votes") / 2
    outcome = (pl.when(pl.col("votes_a") > half).then(pl.lit("A"))
               .when(pl.col("votes_b") > half).then(pl.lit("B")).otherwise(pl.lit("tie")))
    return votes.with_columns(outcome.alias("outcome")).sort(
        "prompt_id", "sample_index", "model_a", "model_b")


def voting_scores(votes: pl.DataFrame) -> pl.DataFrame:
    """Per model: comparisons, wins, losses, ties, ``score`` = (wins + ties/2) / comparisons, rank.

    ``votes`` is the output of :func:`majority_votes` (or any table with
    model_a, model_b and outcome).
    """
    require_columns(votes, ["model_a", "model_b", "outcome"], "voting_scores")
    side_a = votes.select(pl.col("model_a").alias("model"),
                          (pl.col("outcome") == "A").alias("win"),
                          (pl.col("outcome") == "B").alias("loss"))
    side_b = votes.select(pl.col("model_b").alias("model"),
                          (pl.col("outcome") == "B").alias("win"),
                          (pl.col("outcome") == "A").alias("loss"))
    table = (pl.concat([side_a, side_b])
             .group_by("model")
             .agg(pl.len().cast(pl.Int64).alias("comparisons"),
                  pl.col("win").sum().cast(pl.Int64).alias("wins"),
                  pl.col("loss").sum().cast(pl.Int64).alias("losses"))
             .with_columns((pl.col("comparisons") - pl.col("wins") - pl.col("losses"))
                           .alias("ties")))
    table = table.with_columns(
        ((pl.col("wins") + 0.5 * pl.col("ties")) / pl.col("comparisons")).alias("score"))
    return (table.with_columns(pl.col("score").rank("min", descending=True)
                               .cast(pl.Int64).alias("rank"))
            .sort("rank", "model")
            .select("model", "comparisons", "wins", "losses", "ties", "score", "rank"))


def judge_scores(judgments: pl.DataFrame, score: str = "score_weighted", *,
                 judge: str | None = None) -> pl.DataFrame:
    """Per-essay (prompt_id, model, sample_index, genre, score) rows from a judgments
    table, ok rows only (``sample_index`` 0 where the table has none).

    ``score`` is any scoring-variant column: ``score_weighted``,
    ``score_unweighted`` or ``align_total``. Rows whose status is not ok, or
    whose score is null, are left out (never imputed).
    """
    require_columns(judgments, ["prompt_id", "model", "genre", "status", score], "judgments")
    df = judgments
    if judge is not None:
        require_columns(judgments, ["judge"], "judgments")
        df = df.filter(pl.col("judge") == judge)
    elif "judge" in df.columns and df["judge"].n_unique() > 1:
        raise ValueError(f"judgments hold several judges {sorted(df['judge'].unique())}; "
                         "pass judge=")
    return (with_sample_index(df)
            .filter((pl.col("status") == "ok") & pl.col(score).is_not_null())
            .select("prompt_id", "model", "sample_index", "genre",
                    pl.col(score).cast(pl.Float64).alias("score")))


def rank_agreement(human: pl.DataFrame, judge: pl.DataFrame) -> tuple[Correlation, Correlation]:
    """Spearman ρ and Kendall τ between two (model, score) tables over their common models.

    NaN when fewer than :data:`MIN_MODELS` models are in both.
    """
    both = human.select("model", "score").join(
        judge.select("model", pl.col("score").alias("judge_score")), on="model", how="inner")
    if both.height < MIN_MODELS:
        nan = Correlation(math.nan, math.nan, both.height)
        return nan, nan
    return (spearman(both["score"], both["judge_score"]),
            kendall(both["score"], both["judge_score"]))
