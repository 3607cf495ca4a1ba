"""Quality tiers from pairwise annotations (the paper's Table 3 from its pairwise data).

Within each prompt (and sample: sample i of every model is compared with sample i of the
others), every annotated essay gets a voting-based human score — (wins + ties/2) /
comparisons over the majority votes it took part in (:func:`voting_scores`) — and a rank,
1 = best, tied essays sharing the best rank of the tie (1, 1, 3). Tiers then pick essays
of each prompt by that ranking, in one of two ways:

* :data:`TOP_MEDIAN_BOTTOM` (the paper's): high = the top-ranked essay(s), low = the
  bottom-ranked, medium = the median-ranked — the essay(s) at the middle of the ranking
  (the ((n + 1) / 2)-th of n, or both middle ones when n is even), with every essay tied
  with it. An essay tied with the top or bottom is high or low, never medium; a prompt
  whose essays all tie gives no tiers.
* explicit ranks, e.g. high {1}, medium {4}, low {7} (or {1, 2} / {3, 4, 5} / {6, 7}):
  the essays whose rank is in each set.

Each essay's judge score is then compared across tiers with the Mann–Whitney statistic
(:func:`essaybench.human.sensitivity.tier_sensitivity`), pooled over prompts.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import polars as pl

from essaybench.human.annotations import require_columns
from essaybench.human.sensitivity import tiers_from_scores
from essaybench.human.voting import voting_scores

TOP_MEDIAN_BOTTOM = "top/median/bottom"
GROUP = ["prompt_id", "sample_index"]


def essay_voting_scores(votes: pl.DataFrame) -> pl.DataFrame:
    """(prompt_id, sample_index, model, score, rank): each essay's voting score among the
    essays of its prompt and sample, and its rank there (1 = best, ties share the best)."""
    require_columns(votes, [*GROUP, "model_a", "model_b", "outcome"], "majority votes")
    parts = [voting_scores(group).select(
                 pl.lit(key[0], dtype=pl.Utf8).alias("prompt_id"),
                 pl.lit(key[1], dtype=pl.Int64).alias("sample_index"), "model", "score",
                 pl.col("score").rank("min", descending=True).cast(pl.Int64).alias("rank"))
             for key, group in votes.group_by(GROUP, maintain_order=True)]
    schema = {"prompt_id": pl.Utf8, "sample_index": pl.Int64, "model": pl.Utf8,
              "score": pl.Float64, "rank": pl.Int64}
    if not parts:
        return pl.DataFrame(schema=schema)
    return pl.concat(parts).sort(*GROUP, "rank", "model")


def _top_median_bottom(scores: pl.DataFrame) -> pl.Expr:
    """The tier of each row of one prompt's essay scores (see the module docstring)."""
    values = np.sort(scores["score"].to_numpy())  # ascending
    n = values.size
    top, bottom = values[-1], values[0]
    middle = {float(values[(n - 1) // 2]), float(values[n // 2])} - {float(top), float(bottom)}
    if top == bottom:
        return pl.lit(None, dtype=pl.Utf8)
    return (pl.when(pl.col("score") == top).then(pl.lit("high"))
            .when(pl.col("score") == bottom).then(pl.lit("low"))
            .when(pl.col("score").is_in(sorted(middle))).then(pl.lit("medium"))
            .otherwise(pl.lit(None, dtype=pl.Utf8)))


def pairwise_tiers(votes: pl.DataFrame, tiers: str | tuple[Collection[float],
                   Collection[float], Collection[float]]) -> pl.DataFrame:
    """(prompt_id, sample_index, model, score, rank, tier); ``tiers`` is
    :data:`TOP_MEDIAN_BOTTOM` or the (high, medium, low) rank sets. Essays in no tier
    have a null tier."""
    scores = essay_voting_scores(votes)
    if isinstance(tiers, str):
        if tiers != TOP_MEDIAN_BOTTOM:
            raise ValueError(f"pairwise tiers: {tiers!r}; expected {TOP_MEDIAN_BOTTOM!r} or "
                             "rank sets")
        parts = [group.with_columns(_top_median_bottom(group).alias("tier"))
                 for _, group in scores.group_by(GROUP, maintain_order=True)]
        return (pl.concat(parts) if parts
                else scores.with_columns(pl.lit(None, dtype=pl.Utf8).alias("tier")))
    high, medium, low = tiers
    return scores.with_columns(
        tiers_from_scores("rank", high=high, medium=medium, low=low).alias("tier"))
