"""What adaptive sampling reads from a run's tables: each prompt's stratum and the
per-prompt score matrix its decisions are made on; and the calls one sampled prompt is
planned to cost (issue 26 item 3). Pure.

The scores are the leaderboard's: the judgments ranked under the run's ``flagged_essays``
rule (:func:`essaybench.bench.flagged_rule.ranked_judgments`), ok rows only — a failed
judgment is never a score, its prompt is simply missing for that model (NaN) — averaged
per (prompt, model) over judges, repeats and samples into one 0–100 score: the prompt is
the unit the confidence sequences sample (:mod:`essaybench.bench.adaptive`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from essaybench.bench.adaptive import FloatArray
from essaybench.bench.adaptive_order import AdaptiveOrder, adaptive_order
from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.flagged_rule import FlaggedRule, main_score, ranked_judgments
from essaybench.core.contracts import OK

__all__ = ["OPEN_GENRE", "adaptive_prefix", "calls_per_prompt", "max_prompts_of",
           "prompt_scores", "strata_of"]

OPEN_GENRE = "open-genre"  # the stratum of prompts that leave the genre to the essay


def strata_of(prompts: pl.DataFrame) -> dict[str, str]:
    """prompt id → its stratum, ``<genre>/<open|constrained>`` (a prompt without a single
    genre: ``open-genre/<set>``)."""
    return {str(pid): f"{genre or OPEN_GENRE}/{pset}" for pid, genre, pset in
            prompts.select("prompt_id", "genre", "prompt_set").iter_rows()}


def prompt_scores(judgments: pl.DataFrame, prompt_ids: Sequence[str], models: Sequence[str],
                  rule: FlaggedRule) -> FloatArray:
    """(len(prompt_ids), len(models)): each model's mean ranked score on each prompt, in
    the given order; NaN where it has no ok judgment of that prompt."""
    out = np.full((len(prompt_ids), len(models)), np.nan)
    if judgments.height == 0:
        return out
    score = main_score(judgments)
    ranked = ranked_judgments(judgments, rule, score)
    means = (ranked.filter((pl.col("status") == OK) & pl.col(score).is_not_null())
             .group_by("prompt_id", "model").agg(pl.col(score).cast(pl.Float64).mean()))
    row = {p: i for i, p in enumerate(prompt_ids)}
    col = {m: j for j, m in enumerate(models)}
    for pid, model, value in means.iter_rows():
        if pid in row and model in col:
            out[row[pid], col[model]] = float(value)
    return out


def calls_per_prompt(config: BenchmarkConfig) -> int:
    """Planned calls of one sampled prompt: each writer's essays and each judge's call of
    each (times ``repeats`` when every essay is repeated). Genre calls, re-asks and second
    opinions come on top; the budget counts planned calls so that a rerun, served from the
    ledger, stops where the run did."""
    judge = config.judge
    per_essay = len(judge.judges) * (judge.repeats if judge.repeat_when == "all" else 1)
    return len(config.generate.models) * config.generate.samples * (1 + per_essay)


def max_prompts_of(order: AdaptiveOrder, config: BenchmarkConfig) -> int:
    """The most prompts an adaptive run can ask for: ``max_prompts`` and ``max_calls``
    (planned calls, as the loop counts them) applied to the selection."""
    params = config.sampling
    n = len(order.prompt_ids)
    if params.max_prompts is not None:
        n = min(n, params.max_prompts)
    if params.max_calls is not None:
        n = min(n, params.max_calls // calls_per_prompt(config))
    return n


def adaptive_prefix(selected: pl.DataFrame, config: BenchmarkConfig,
                    n: int | None = None) -> pl.DataFrame:
    """The first ``n`` prompts (None: :func:`max_prompts_of`) of ``selected`` in the run's
    seeded order: what an adaptive run can sample at most (for its estimate and budget)."""
    order = adaptive_order(strata_of(selected), config.sampling)
    n = max_prompts_of(order, config) if n is None else n
    return selected.filter(pl.col("prompt_id").is_in(list(order.prompt_ids[:n])))
