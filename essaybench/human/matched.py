"""Judge against humans on exactly the essays the humans annotated.

The paper samples prompts, has people annotate the models' essays on them, and compares
judge and people on that sample. Here both sides are computed over the same essays —
(prompt, model, sample) — the annotated ones the judge scored with status ok:

* essays the judge scored but nobody annotated are never used (the judge's other prompts
  say nothing about whether it agrees with these people);
* an annotated essay without an ok judge score is left out of both sides and counted
  (``n_unjudged``); for pairwise annotations every vote involving it is left out.

Scopes: ``overall``, then each genre, then :data:`CROSS_GENRE`. An essay's genre is the
one whose rubric this judge scored it with (its ok judge row's ``genre``): a prompt's genre,
or — for an open or multi-genre prompt (文体不限, 议论文或记叙文) — the genre the judge said
that essay chose, so one prompt's essays may sit in several genres, and two judges may
place the same essay differently. A genre's scope holds the essays judged with that
genre's rubric and, for pairwise annotations, the votes between two of them; a vote
between two essays judged with different rubrics (only an open prompt has those) is in
no genre's scope, and is reported in its own scope, :data:`CROSS_GENRE`. So every
compared essay is in ``overall`` and in its genre's scope or ``cross-genre`` (or both),
every vote in ``overall`` and in exactly one other scope, and nothing depends on the
order of the input rows. (An ok score without a genre is in ``overall`` only.)

Two correlations per scope:

* ``model means``: Spearman ρ and Kendall τ-b (scipy; two-sided p-values) between the
  humans' per-model score — the voting score of the pairwise majority votes, or the mean
  over essays of the annotators' mean absolute score — and the judge's per-model mean over
  the same essays. With k models τ moves in steps of 2/(k(k − 1)): 1/21 for 7 models.
* ``per-prompt mean``: the same two correlations within each prompt (the human and judge
  scores of the models annotated on that prompt), averaged over prompts. A prompt with
  fewer than 3 models, or whose human or judge scores are all equal, has no correlation
  and is left out (``n_used`` counts the prompts that have one). Its interval is the
  t-interval of the mean over those prompts (:func:`essaybench.stats.cluster_t.cluster_t_means`
  with one value per prompt: the one-sample t-interval), clipped to [−1, 1] — the
  percentile bootstrap it replaces covers ≈ 92% at 15 prompts (issue 25 item 11) —,
  given only from :data:`MIN_PROMPTS_FOR_CI` prompts on; with fewer the bounds are null,
  not a misleadingly narrow interval. ``seed`` and ``n_boot`` are accepted for old
  callers and not used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import polars as pl

from essaybench.human.annotations import require_columns
from essaybench.human.voting import (
    MIN_MODELS,
    majority_votes,
    rank_agreement,
    voting_scores,
    with_sample_index,
)
from essaybench.stats.cluster_t import cluster_t_means

KEYS = ["prompt_id", "model", "sample_index"]
OVERALL = "overall"
MODEL_MEANS = "model means"
PER_PROMPT = "per-prompt mean"
CROSS_GENRE = "cross-genre"  # scope of votes between essays judged with different rubrics
MIN_PROMPTS_FOR_CI = 10  # fewer prompts: a mean of a handful of correlations
VOTE_KEYS = ["prompt_id", "sample_index", "model_a", "model_b"]

Kind = Literal["pairwise", "absolute"]


@dataclass(frozen=True)
class Matched:
    """The essays humans and the judge both scored, and what each side said of them."""

    kind: Kind
    essays: pl.DataFrame  # KEYS, genre, judge: the judge's score of each compared essay
    # absolute: KEYS, genre, score, n_scores; pairwise: the kept votes, ``genre`` the two
    # essays' common genre, or CROSS_GENRE when they differ (null when either has none)
    human: pl.DataFrame
    n_unjudged: int  # annotated essays left out: the judge has no ok score for them

    def in_genre(self, genre: str) -> Matched:
        """The scope ``genre`` (or :data:`CROSS_GENRE`): its human rows, and the essays
        they are about (pairwise: every essay of a vote in the scope)."""
        human = self.human.filter(pl.col("genre") == genre)
        if self.kind == "pairwise":
            essays = self.essays.join(_ends(human), on=KEYS, how="semi")
        else:
            essays = self.essays.filter(pl.col("genre") == genre)
        return replace(self, essays=essays, human=human)

    def scopes(self) -> list[str]:
        """The genres present (alphabetically), then :data:`CROSS_GENRE` if any vote is."""
        named = {g for g in self.human["genre"].unique().to_list() if g is not None}
        return sorted(named - {CROSS_GENRE}) + ([CROSS_GENRE] if CROSS_GENRE in named else [])

    def in_prompt(self, prompt: str) -> Matched:
        return replace(self, essays=self.essays.filter(pl.col("prompt_id") == prompt),
                       human=self.human.filter(pl.col("prompt_id") == prompt))

    def human_scores(self) -> pl.DataFrame:
        """(model, score): voting scores, or the mean over essays of the essays' means."""
        if self.kind == "pairwise":
            return voting_scores(self.human).select("model", "score")
        return self.human.group_by("model").agg(pl.col("score").mean())

    def judge_scores(self) -> pl.DataFrame:
        """(model, score): the judge's mean over the compared essays."""
        return self.essays.group_by("model").agg(pl.col("judge").mean().alias("score"))

    def n_human_rows(self) -> int:
        """Majority-vote outcomes (prompt × sample × pair), or absolute scores, used."""
        return (self.human.height if self.kind == "pairwise"
                else int(self.human["n_scores"].sum()))


def _ends(votes: pl.DataFrame) -> pl.DataFrame:
    """KEYS of every essay the votes compare."""
    return pl.concat([votes.select("prompt_id", pl.col(side).alias("model"), "sample_index")
                      for side in ("model_a", "model_b")]).unique()


def _judged(judge_rows: pl.DataFrame) -> pl.DataFrame:
    """KEYS, genre, judge: one row per essay, sorted (so that no mean or later step
    depends on the order of the input rows)."""
    require_columns(judge_rows, [*KEYS, "genre", "score"], "judge scores")
    judged = (judge_rows.sort(*KEYS, "score", nulls_last=True).group_by(KEYS)
              .agg(pl.col("score").mean().alias("judge"),
                   pl.col("genre").drop_nulls().unique().sort().alias("genres"))
              .sort(*KEYS))
    several = judged.filter(pl.col("genres").list.len() > 1)
    if not several.is_empty():
        first = several.row(0, named=True)
        raise ValueError(f"judge scores: essay {first['prompt_id']}/{first['model']}/"
                         f"{first['sample_index']} was scored with several genres' rubrics "
                         f"{first['genres']}; pass one judge's rows")
    return judged.select(*KEYS, pl.col("genres").list.first().alias("genre"), "judge")


def match_essays(annotations: pl.DataFrame, kind: Kind, judge_rows: pl.DataFrame) -> Matched:
    """The annotated essays the judge scored. ``judge_rows``: one judge's ok scores with
    the genre each essay was scored as (:func:`essaybench.human.voting.judge_scores`); that
    genre, not a genre per prompt, files the essay (see the module docstring)."""
    judged = _judged(judge_rows)
    if kind == "absolute":
        require_columns(annotations, ["prompt_id", "model", "score"], "absolute annotations")
        human = (with_sample_index(annotations).sort(*KEYS, "score").group_by(KEYS)
                 .agg(pl.col("score").mean(), pl.len().cast(pl.Int64).alias("n_scores")))
        both = human.join(judged, on=KEYS, how="inner").sort(*KEYS)
        return Matched(kind, both.select(*KEYS, "genre", "judge"),
                       both.select(*KEYS, "genre", "score", "n_scores"),
                       human.height - both.height)
    votes = majority_votes(annotations).drop("genre")
    genre_of = judged.select(*KEYS, "genre")
    kept = votes
    for side in ("a", "b"):  # inner joins: a vote about an unjudged essay is left out
        kept = kept.join(genre_of.rename({"model": f"model_{side}", "genre": f"genre_{side}"}),
                         on=["prompt_id", f"model_{side}", "sample_index"], how="inner")
    vote_genre = (pl.when(pl.col("genre_a") == pl.col("genre_b")).then(pl.col("genre_a"))
                  .when(pl.col("genre_a").is_not_null() & pl.col("genre_b").is_not_null())
                  .then(pl.lit(CROSS_GENRE)))
    kept = (kept.with_columns(vote_genre.alias("genre")).drop("genre_a", "genre_b")
            .sort(*VOTE_KEYS))
    essays = judged.join(_ends(kept), on=KEYS, how="semi").sort(*KEYS)
    n_unjudged = _ends(votes).join(judged, on=KEYS, how="anti").height
    return Matched(kind, essays, kept, n_unjudged)


def per_prompt_correlations(matched: Matched) -> pl.DataFrame:
    """One row per prompt of ``matched`` (of a scope: that scope's part of each prompt):
    its genre (null when its compared essays were judged with several genres' rubrics),
    models compared, Spearman ρ and Kendall τ (NaN when undefined: fewer than 3 models, or
    all human or all judge scores equal)."""
    rows = []
    for prompt in sorted(matched.essays["prompt_id"].unique().to_list()):
        one = matched.in_prompt(prompt)
        rho, tau = rank_agreement(one.human_scores(), one.judge_scores())
        genres = one.essays["genre"].unique().to_list()
        rows.append({"prompt_id": prompt, "genre": genres[0] if len(genres) == 1 else None,
                     "n_models": rho.n, "spearman": rho.statistic, "kendall": tau.statistic})
    return pl.DataFrame(rows, schema={"prompt_id": pl.Utf8, "genre": pl.Utf8,
                                      "n_models": pl.Int64, "spearman": pl.Float64,
                                      "kendall": pl.Float64})


def _base(matched: Matched, scope: str, method: str) -> dict[str, object]:
    return {"scope": scope, "method": method, "n_essays": matched.essays.height,
            "n_prompts": matched.essays["prompt_id"].n_unique(),
            "n_models": matched.essays["model"].n_unique(),
            "n_human_rows": matched.n_human_rows()}


def _undefined_model_level(n: int, human: pl.DataFrame, judge: pl.DataFrame) -> str:
    """Why the correlation of the model means is undefined (it is NaN)."""
    if n < MIN_MODELS:
        return f"undefined: {n} model(s) scored by both, a rank correlation needs {MIN_MODELS}"
    if human["score"].n_unique() == 1:
        return "undefined: the humans scored every model alike"
    if judge["score"].n_unique() == 1:
        return "undefined: the judge scored every model alike"
    return "undefined"


def _model_level(matched: Matched, scope: str) -> dict[str, object]:
    human, judge = matched.human_scores(), matched.judge_scores()
    rho, tau = rank_agreement(human, judge)
    note = (_undefined_model_level(rho.n, human, judge)
            if math.isnan(rho.statistic) or math.isnan(tau.statistic) else None)
    return _base(matched, scope, MODEL_MEANS) | {
        "n_used": rho.n, "spearman": rho.statistic, "spearman_lo": None, "spearman_hi": None,
        "spearman_p": rho.p_value, "kendall": tau.statistic, "kendall_lo": None,
        "kendall_hi": None, "kendall_p": tau.p_value, "note": note}


def _prompt_level(matched: Matched, scope: str, prompts: pl.DataFrame, *, seed: int,
                  n_boot: int, level: float) -> dict[str, object]:
    defined = prompts.filter(pl.col("spearman").is_not_nan() & pl.col("kendall").is_not_nan())
    values = defined.select("spearman", "kendall").to_numpy()
    means = [math.nan, math.nan] if values.size == 0 else list(values.mean(axis=0))
    lo: list[float | None] = [None, None]
    hi: list[float | None] = [None, None]
    if defined.height >= MIN_PROMPTS_FOR_CI:
        res = cluster_t_means(values, np.ones_like(values), level=level,
                              min_prompts=MIN_PROMPTS_FOR_CI)
        lo = [None if np.isnan(v) else float(max(v, -1.0)) for v in res.lo]
        hi = [None if np.isnan(v) else float(min(v, 1.0)) for v in res.hi]
    return _base(matched, scope, PER_PROMPT) | {
        "n_used": defined.height, "spearman": float(means[0]), "spearman_lo": lo[0],
        "spearman_hi": hi[0], "spearman_p": None, "kendall": float(means[1]),
        "kendall_lo": lo[1], "kendall_hi": hi[1], "kendall_p": None,
        "note": None if defined.height else (
            f"undefined: no prompt with a correlation (each needs {MIN_MODELS} models scored "
            "by both, not all alike)")}


SCHEMA: dict[str, type[pl.DataType]] = {
    "scope": pl.Utf8, "method": pl.Utf8, "n_essays": pl.Int64, "n_prompts": pl.Int64,
    "n_models": pl.Int64, "n_human_rows": pl.Int64, "n_unjudged": pl.Int64, "n_used": pl.Int64,
    "spearman": pl.Float64, "spearman_lo": pl.Float64, "spearman_hi": pl.Float64,
    "spearman_p": pl.Float64, "kendall": pl.Float64, "kendall_lo": pl.Float64,
    "kendall_hi": pl.Float64, "kendall_p": pl.Float64,
    "note": pl.Utf8}  # why a correlation is undefined (NaN): too few models, all alike


def judge_human_agreement(matched: Matched, *, seed: int = 0, n_boot: int = 2000,
                          level: float = 0.95) -> pl.DataFrame:
    """Two rows per scope (overall, genres alphabetically, then :data:`CROSS_GENRE` when
    any vote is between genres): ``model means`` and ``per-prompt mean`` (see the module
    docstring). ``n_used``: models in the model-level correlation, prompts with a defined
    correlation in the per-prompt mean; a genre's per-prompt correlations are taken over
    the prompt's essays (and votes) in that genre."""
    scopes = [(OVERALL, matched)] + [(g, matched.in_genre(g)) for g in matched.scopes()]
    rows = []
    for scope, part in scopes:
        for row in (_model_level(part, scope),
                    _prompt_level(part, scope, per_prompt_correlations(part), seed=seed,
                                  n_boot=n_boot, level=level)):
            rows.append(row | {"n_unjudged": matched.n_unjudged if scope == OVERALL else None})
    return pl.DataFrame(rows, schema=SCHEMA)
