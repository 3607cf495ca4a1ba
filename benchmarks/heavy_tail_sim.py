"""A heavy-lower-tail Table 5 cell built from WritingPreferenceBench's human scores.

Issue 25 item 8: cluster-t cell means under-cover in small cells whose scores have a
heavy lower tail (a few essays off the task, scoring far below the rest). This simulator
takes its prompt effects, model levels and ceilings from real data — the Chinese half of
WritingPreferenceBench (``/work/shared/data/writingpreferencebench``, see its README.txt:
204 prompts × 20 LLMs, one human score 0–3 each) — and adds the off-task answers and the
random failures the issue describes:

* **Models.** :data:`N_MODELS` of the 20, evenly spaced in the order of their mean human
  score (the weakest, the strongest and six between), on the prompts every one of them
  has a score for.
* **Population.** Prompt p's score of model k is its human score s_pk mapped onto the
  0–100 scale by :data:`LEVEL_POINTS` (0 → 45 … 3 → 93) plus judge noise N(0, 4²) per
  essay, clipped to 10–100: good models bunch under the ceiling (the strongest has 57%
  threes), and the prompt effect shared by all models is the data's own (prompts are
  drawn with replacement from the real prompt rows, the same rows for every model, so
  differences stay paired).
* **Off-task answers.** With probability π_k, from :data:`OFF_TASK` = 11% for the weakest
  down to 7% for the strongest, an essay misses the task and scores N(35, 5²) (clipped)
  instead: the heavy lower tail.
* **Failures.** 3% of judgments fail completely at random (excluded, never imputed).

The estimand of model k is its expected score over the 204-prompt population, computed
exactly (:func:`true_means`): (1 − π_k)·mean_p E[clip(L(s_pk) + e)] + π_k·E[clip(35 + e')],
with the expectation of a clipped normal in closed form.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import polars as pl
from numpy.typing import NDArray
from scipy import stats

FloatArray = NDArray[np.float64]

DATA_ENV = "ESSAYBENCH_WPB_DIR"
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "writingpreferencebench"
N_MODELS = 8
LEVEL_POINTS = (45.0, 62.0, 78.0, 93.0)  # human score 0, 1, 2, 3 → points on 0–100
JUDGE_SD = 4.0
OFF_TASK = (0.11, 0.07)  # off-task share of the weakest … strongest model
OFF_TASK_MEAN, OFF_TASK_SD = 35.0, 5.0
FAIL_RATE = 0.03
BOUNDS = (10.0, 100.0)


def data_dir() -> Path:
    """Where the WritingPreferenceBench files are: $ESSAYBENCH_WPB_DIR, else ../shared."""
    return Path(os.environ.get(DATA_ENV) or DEFAULT_DIR)


def missing_reason() -> str | None:
    """Why the heavy-tail scenario cannot run here (None when it can)."""
    path = data_dir() / "responses_scores.jsonl"
    if not path.is_file():
        return (f"the heavy-tail scenario needs WritingPreferenceBench's human scores at "
                f"{path} (set {DATA_ENV} to its folder)")
    return None


@dataclass(frozen=True)
class HeavyTailPopulation:
    models: tuple[str, ...]
    levels: FloatArray  # (n_prompts, n_models) mapped human score of each prompt row
    off_task: FloatArray  # (n_models,) π_k

    @property
    def n_models(self) -> int:
        return len(self.models)


@cache
def load_population(folder: str | None = None) -> HeavyTailPopulation:
    """The 8 models' mapped human scores on every prompt all of them were scored on."""
    path = Path(folder) if folder else data_dir()
    rows = pl.read_ndjson(path / "responses_scores.jsonl").select(
        "question_id", "model_dir", "score")
    means = rows.group_by("model_dir").agg(pl.col("score").mean()).sort("score", "model_dir")
    names = means["model_dir"].to_list()
    pick = [names[i] for i in np.rint(np.linspace(0, len(names) - 1, N_MODELS)).astype(int)]
    wide = (rows.filter(pl.col("model_dir").is_in(pick))
            .pivot(on="model_dir", index="question_id", values="score")
            .drop_nulls().sort("question_id"))
    scores = wide.select(pick).to_numpy().astype(np.int64)
    levels = np.asarray(LEVEL_POINTS)[scores]
    return HeavyTailPopulation(models=tuple(pick), levels=levels,
                               off_task=np.linspace(OFF_TASK[0], OFF_TASK[1], N_MODELS))


def clipped_normal_mean(mu: FloatArray | float, sd: float, lo: float = BOUNDS[0],
                        hi: float = BOUNDS[1]) -> FloatArray:
    """E[clip(X, lo, hi)] for X ~ N(mu, sd²), exactly."""
    m = np.asarray(mu, dtype=np.float64)
    a, b = (lo - m) / sd, (hi - m) / sd
    inside = m * (stats.norm.cdf(b) - stats.norm.cdf(a)) + sd * (stats.norm.pdf(a)
                                                                   - stats.norm.pdf(b))
    return np.asarray(inside + lo * stats.norm.cdf(a) + hi * stats.norm.sf(b),
                      dtype=np.float64)


def true_means(pop: HeavyTailPopulation) -> FloatArray:
    """Each model's expected score over the prompt population, all judgments ok."""
    on_task = clipped_normal_mean(pop.levels, JUDGE_SD).mean(axis=0)
    off = float(clipped_normal_mean(OFF_TASK_MEAN, OFF_TASK_SD))
    return np.asarray((1.0 - pop.off_task) * on_task + pop.off_task * off, dtype=np.float64)


def essay_scores(rng: np.random.Generator, pop: HeavyTailPopulation,
                 n_prompts: int) -> FloatArray:
    """(n_prompts, n_models) scores of prompts drawn from the population, fresh essays."""
    rows = rng.integers(0, pop.levels.shape[0], size=n_prompts)
    on = pop.levels[rows] + rng.normal(0.0, JUDGE_SD, size=(n_prompts, pop.n_models))
    off = rng.normal(OFF_TASK_MEAN, OFF_TASK_SD, size=on.shape)
    missed = rng.random(on.shape) < pop.off_task[None, :]
    return np.asarray(np.clip(np.where(missed, off, on), *BOUNDS), dtype=np.float64)


def simulate_cell(rng: np.random.Generator, pop: HeavyTailPopulation,
                  n_prompts: int) -> tuple[FloatArray, FloatArray]:
    """(sums, counts) of ok scores per (prompt, model), one essay per prompt."""
    scores = essay_scores(rng, pop, n_prompts)
    ok = rng.random(scores.shape) >= FAIL_RATE
    return np.where(ok, scores, 0.0), ok.astype(np.float64)
