"""A realistic simulator of one Table 5 cell: rubric scores as the judge and scoring produce them.

Each essay gets one integer 1–10 per sub-question of the genre's rubric (the built-in
``essaybench.v1`` argumentative traits: 6 traits, 23 sub-questions, depths 0–3),
summed per trait, weighted by α^depth and normalised to 0–100 exactly as
:func:`essaybench.bench.scoring.essay_score` does (tested). Scores are therefore
discrete, bounded (10–100) and, for good models, bunched under the ceiling.

The latent quality behind a sub-score of model k on prompt p, essay sample s, trait t,
question q is

    a_k + d_p + σ_k·(g_kp + e_kps) + u_kpst + v_kpstq,

rounded and clipped to 1–10: a_k the model's level, d_p ~ N(0, 0.8²) the prompt's
difficulty (shared by all models, so paired differences are tighter than means), g ~
N(0, 0.5²) a model × prompt interaction and e ~ N(0, 0.6²) essay-to-essay noise, both
scaled by a model-specific σ_k (unequal variances: weak models vary more), u ~
N(0, 0.5²) a trait-level and v ~ N(0, 0.7²) a question-level judging noise. The eight
default models range from a mean score of ≈ 65 (sd ≈ 16) to ≈ 90 (sd ≈ 8, skewness
≈ −0.8 against the ceiling).

Failures: a share ``fail_rate`` of judgments fails completely at random (excluded, never
imputed). With ``mnar`` > 0 failures are missing NOT at random: an essay's failure
probability is ``mnar``·exp((75 − score)/10), capped at 0.9 — weak essays fail more
(e.g. they are refused or break the output format), so the mean over ok scores is biased
upwards and no interval built from the ok scores alone can be trusted to cover.

The estimand is each model's expected score over the prompt distribution (all judgments
successful), computed exactly from normal probabilities (:func:`true_means`; checked
against a large Monte Carlo draw in the tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from essaybench.bench.judge.reading import trait_specs
from essaybench.bench.rubrics import load_rubric

FloatArray = NDArray[np.float64]

LEVELS = (6.5, 6.9, 7.3, 7.7, 8.1, 8.5, 8.9, 9.3)  # a_k, one per default model
SPREADS = (1.8, 1.6, 1.45, 1.3, 1.1, 0.95, 0.8, 0.6)  # σ_k


@dataclass(frozen=True)
class RealisticConfig:
    levels: tuple[float, ...] = LEVELS
    spreads: tuple[float, ...] = SPREADS
    samples: int = 1  # essays per (prompt, model)
    fail_rate: float = 0.05  # completely at random
    mnar: float = 0.0  # 0: no failures that depend on the essay's score
    genre: str = "argumentative"

    @property
    def n_models(self) -> int:
        return len(self.levels)


@cache
def rubric_layout(genre: str) -> tuple[FloatArray, NDArray[np.int64], float]:
    """(weight per sub-question, trait index per sub-question, maximum weighted sum)."""
    rubric = load_rubric()
    specs = trait_specs(rubric, genre)
    alpha = rubric.alpha_default
    weights = np.array([alpha ** t.depth for t in specs for _ in t.question_ids])
    trait_of = np.array([i for i, t in enumerate(specs) for _ in t.question_ids],
                        dtype=np.int64)
    return weights, trait_of, float(10.0 * weights.sum())


def essay_scores(rng: np.random.Generator, cfg: RealisticConfig, n_prompts: int,
                 samples: int | None = None) -> FloatArray:
    """(n_prompts, n_models, samples) 0–100 scores of freshly drawn prompts and essays."""
    s = cfg.samples if samples is None else samples
    k = cfg.n_models
    weights, trait_of, best = rubric_layout(cfg.genre)
    n_traits = int(trait_of.max()) + 1
    level = np.asarray(cfg.levels)[None, :, None, None]
    spread = np.asarray(cfg.spreads)[None, :, None, None]
    difficulty = rng.normal(0.0, 0.8, size=(n_prompts, 1, 1, 1))
    inter = rng.normal(0.0, 0.5, size=(n_prompts, k, 1, 1))
    essay = rng.normal(0.0, 0.6, size=(n_prompts, k, s, 1))
    trait = rng.normal(0.0, 0.5, size=(n_prompts, k, s, n_traits))[..., trait_of]
    question = rng.normal(0.0, 0.7, size=(n_prompts, k, s, len(weights)))
    latent = level + difficulty + spread * (inter + essay) + trait + question
    sub = np.clip(np.rint(latent), 1.0, 10.0)
    return np.asarray(100.0 * (sub @ weights) / best, dtype=np.float64)


def failed(rng: np.random.Generator, cfg: RealisticConfig, scores: FloatArray) -> np.ndarray:
    """Which judgments fail: at random, plus (``mnar``) more often for weak essays."""
    p = np.full(scores.shape, cfg.fail_rate)
    if cfg.mnar > 0:
        p = p + np.minimum(0.9, cfg.mnar * np.exp((75.0 - scores) / 10.0))
    return np.asarray(rng.random(scores.shape) < np.minimum(p, 0.95), dtype=bool)


def simulate_cell(rng: np.random.Generator, cfg: RealisticConfig,
                  n_prompts: int) -> tuple[FloatArray, FloatArray]:
    """(sums, counts) of ok scores per (prompt, model): what score_ci builds per cell."""
    scores = essay_scores(rng, cfg, n_prompts)
    ok = ~failed(rng, cfg, scores)
    return (np.where(ok, scores, 0.0).sum(axis=2),
            ok.sum(axis=2).astype(np.float64))


def true_means(cfg: RealisticConfig) -> FloatArray:
    """Each model's expected score over prompts and essays, all judgments ok — exactly.

    The score is linear in the sub-scores, so its expectation is 10 × the expected
    sub-score (the weights cancel against the maximum). Each sub-score is
    clip(rint(X), 1, 10) with X ~ N(a_k, τ_k²), τ_k² the sum of the latent variances
    (0.8² + σ_k²·(0.5² + 0.6²) + 0.5² + 0.7²), and E[clip(rint(X), 1, 10)] =
    1 + Σ_{j=1..9} P(X > j + ½).
    """
    level = np.asarray(cfg.levels)
    tau = np.sqrt(0.8**2 + np.asarray(cfg.spreads) ** 2 * (0.5**2 + 0.6**2) + 0.5**2 + 0.7**2)
    steps = np.arange(1, 10)[:, None] + 0.5
    return np.asarray(10.0 * (1.0 + stats.norm.sf(steps, loc=level, scale=tau).sum(axis=0)),
                      dtype=np.float64)
