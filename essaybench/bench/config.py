"""The benchmark config (``configs/benchmark.yaml``): which prompt set, which models
write, which judge, pairwise and statistics settings — validated data, read strictly.
``select_prompts`` draws the seeded per-genre sample the run uses."""

from __future__ import annotations

import random
from collections.abc import Sequence
from itertools import zip_longest
from pathlib import Path

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from essaybench.bench.adaptive_order import SamplingParams
from essaybench.bench.alerts import AlertParams
from essaybench.bench.drift import DriftParams
from essaybench.bench.flagged_rule import DEFAULT_FLAGGED_RULE, FlaggedRule
from essaybench.bench.generate import GenerateParams
from essaybench.bench.health import HealthParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.bench.pairwise.design import PairwiseParams
from essaybench.bench.rotation import RotationParams
from essaybench.bench.sharding import ShardingParams
from essaybench.bench.stats_tables import StatsParams
from essaybench.core.contracts import GENRES
from essaybench.core.yamlio import YamlConfigError, load_model
from essaybench.llm.batch.options import BatchOptions

__all__ = [
    "BenchmarkConfig", "BenchmarkConfigError", "load_benchmark_config", "select_prompts",
]


class BenchmarkConfigError(YamlConfigError):
    """The benchmark config is wrong: the message names the file and line."""


class BenchmarkConfig(BaseModel):
    """A benchmark run: the prompt set and its sample, the writers (``generate``), the
    judges (``judge``, optional ``pairwise``), the statistics, the health floor, the
    alerts, judge drift, sharding, adaptive sampling and the budget
    (``configs/benchmark.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_set: str = Field(default="latest",
                            description="Prompt-set version (ps-…), or 'latest' published.")
    per_genre: int | None = Field(default=None, ge=1,
                                  description="Sample this many prompts per genre (None: all).")
    sample_seed: int = Field(default=0, description="Seed of the per-genre prompt sample.")
    genres: tuple[str, ...] | None = Field(
        default=None, min_length=1, description="Only prompts of these genres (None: every "
        "genre); a genre's sample does not depend on which others are listed.")
    generate: GenerateParams
    judge: JudgeParams
    pairwise: PairwiseParams | None = Field(
        default=None, description="Order-swapped pairwise judging of the essays (optional).")
    stats: StatsParams = Field(default_factory=StatsParams,
                               description="Bootstrap settings of the stats stage.")
    health: HealthParams = Field(default_factory=HealthParams,
                                 description="When a run counts as failed (coverage floor).")
    alerts: AlertParams = Field(default_factory=AlertParams,
                                description="Week-over-week alert thresholds and webhooks.")
    drift: DriftParams | None = Field(
        default_factory=DriftParams, description="Judge-drift sentinel: every judge "
        "re-scores the anchor set each run (null: off; runs are then not checked).")
    sharding: ShardingParams | None = Field(
        default=None, description="Run generate+judge as shards on a Prefect work pool "
        "(null: in this process).")
    flagged_essays: FlaggedRule = Field(
        default=DEFAULT_FLAGGED_RULE, description="How flagged judgments (an essay that "
        "addresses the judge, scores that look steered) count in the leaderboard: "
        "second_opinion (the second judge's score where judge.second_judge gave one, else "
        "the first judge's, marked), exclude (left out of the mean, lowering coverage) or "
        "first_judge. See bench/flagged_rule.py for why second_opinion is the default.")
    sampling: SamplingParams = Field(
        default_factory=SamplingParams, description="Which prompts are asked for: full "
        "(every selected prompt, the default) or adaptive (seeded rounds, stopping once every "
        "question is decided by anytime-valid confidence sequences; docs/adaptive.md).")
    rotation: RotationParams | None = Field(
        default=None, description="Rotate the weekly set: a fixed core plus rotate_share of "
        "each genre x set stratum drawn from the prompt set as a pool (needs per_genre "
        "below the pool's size; docs/weekly.md, Prompt rotation). None: the same prompts "
        "every week.")
    max_cost_usd: float | None = Field(
        default=None, ge=0, description="run/rerun refuse when the estimate exceeds this "
        "(USD at the registry's list prices; see essaybench estimate). None: no cap.")
    batch: BatchOptions = Field(
        default_factory=BatchOptions, description="How the calls of registry entries with "
        "batch: openai | anthropic go through the provider's batch API: on_expired "
        "(resubmit | direct | fail), max_resubmits, polling (poll_initial_s, poll_factor, "
        "poll_max_s), max_items (docs/gateway.md, Batch mode).")

    @field_validator("genres")
    @classmethod
    def _known_genres(cls, genres: tuple[str, ...] | None) -> tuple[str, ...] | None:
        unknown = sorted(set(genres or ()) - set(GENRES))
        if unknown:
            raise ValueError(f"unknown genres {unknown}; genres: {', '.join(GENRES)}")
        return genres

    @model_validator(mode="after")
    def _rotation_needs_per_genre(self) -> BenchmarkConfig:
        if self.rotation is not None and self.per_genre is None:
            raise ValueError("rotation needs per_genre (the weekly prompts per genre, "
                             "fewer than the pool has)")
        return self

    @model_validator(mode="after")
    def _criteria_in_one_process(self) -> BenchmarkConfig:
        # A shard or an adaptive round builds its judge calls without the store, where
        # the gold set is: its calls would silently lack the criteria.
        if self.judge.gold_criteria and (self.sharding is not None
                                         or self.sampling.mode != "full"):
            raise ValueError("judge.gold_criteria is not supported with sharding or adaptive "
                             "sampling (yet): run without them")
        return self

    def judges(self) -> list[str]:
        """Every model this run asks to judge (rubric, second judge, pairwise), once each."""
        pairwise = self.pairwise.judges if self.pairwise is not None else []
        second = [self.judge.second_judge] if self.judge.second_judge else []
        return list(dict.fromkeys([*self.judge.judges, *second, *pairwise]))

    def models(self) -> list[str]:
        pairwise = self.pairwise.judges if self.pairwise is not None else []
        second = [self.judge.second_judge] if self.judge.second_judge else []
        return list(dict.fromkeys([*self.generate.models, *self.judge.judges, *second,
                                   *pairwise]))


def load_benchmark_config(path: Path | str) -> BenchmarkConfig:
    """Read and validate a benchmark config file; a mistake is a
    ``BenchmarkConfigError`` naming the file, line and field."""
    return load_model(BenchmarkConfig, path, "benchmark config", error=BenchmarkConfigError)


def select_prompts(prompts: pl.DataFrame, per_genre: int | None, seed: int,
                   genres: Sequence[str] | None = None) -> pl.DataFrame:
    """Up to ``per_genre`` prompts of each genre (of ``genres`` only, when given),
    alternating Open and Constrained, drawn by a seeded shuffle of the prompt ids (so the
    sample does not depend on file order).

    Prompts without a single genre (an open genre or a choice, kept by classify's
    ``keep_genre_choice``; the judge asks which genre each essay chose) are a pool of their
    own, drawn after the four genres (so the genres' samples are the same with or without
    them). They belong to no listed genre: with ``genres`` set they are left out."""
    if genres is not None:  # after the draw: a genre's sample is the same with or without others
        return select_prompts(prompts, per_genre, seed).filter(
            pl.col("genre").is_in(list(genres)))
    if per_genre is None:
        return prompts
    rng = random.Random(seed)
    chosen: list[str] = []
    for genre in (*GENRES, None):
        same = pl.col("genre").is_null() if genre is None else pl.col("genre") == genre
        pools = []
        for pset in ("open", "constrained"):
            ids = sorted(prompts.filter(same & (pl.col("prompt_set") == pset))["prompt_id"]
                         .to_list())
            rng.shuffle(ids)
            pools.append(ids)
        interleaved = [pid for pair in zip_longest(*pools) for pid in pair if pid is not None]
        chosen.extend(interleaved[:per_genre])
    return prompts.filter(pl.col("prompt_id").is_in(chosen)).sort("genre", "prompt_id")
