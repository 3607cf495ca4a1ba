"""Judge vs humans on exactly the annotated essays (issue 16, item 1), checked against
scipy's spearmanr / kendalltau on hand-built human and judge scores."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping
from itertools import combinations
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy import stats

from essaybench.human.matched import (
    MIN_PROMPTS_FOR_CI,
    MODEL_MEANS,
    PER_PROMPT,
    judge_human_agreement,
    match_essays,
)
from essaybench.human.voting import judge_scores

MODELS = ["m1", "m2", "m3"]


def judgments(scores: Mapping[tuple[str, str], float], genre: dict[str, str] | None = None,
              failed: set[tuple[str, str]] | None = None) -> pl.DataFrame:
    """One judge's rows: ``scores[(prompt, model)]``; ``failed`` essays are parse_error."""
    failed = failed or set()
    return pl.DataFrame(
        [{"judge": "j", "prompt_id": p, "model": m, "sample_index": 0,
          "genre": (genre or {}).get(p, "narrative"),
          "status": "parse_error" if (p, m) in failed else "ok",
          "score_weighted": None if (p, m) in failed else s}
         for (p, m), s in scores.items()],
        schema={"judge": pl.Utf8, "prompt_id": pl.Utf8, "model": pl.Utf8,
                "sample_index": pl.Int64, "genre": pl.Utf8, "status": pl.Utf8,
                "score_weighted": pl.Float64})


def pairwise(votes: dict[tuple[str, str, str], str]) -> pl.DataFrame:
    """Three annotators per (prompt, a, b), their verdicts given as e.g. "AAB"."""
    return pl.DataFrame([{"prompt_id": p, "model_a": a, "model_b": b, "annotator": f"r{k}",
                          "verdict": {"A": "A", "B": "B", "T": "tie"}[v]}
                         for (p, a, b), verdicts in votes.items()
                         for k, v in enumerate(verdicts)])


def agreement(annotations: pl.DataFrame, judged: pl.DataFrame, kind: str = "pairwise",
              **kw: int) -> pl.DataFrame:
    matched = match_essays(annotations, kind,  # type: ignore[arg-type]
                           judge_scores(judged, judge="j"), judged)
    return judge_human_agreement(matched, **kw)


def row(table: pl.DataFrame, method: str, scope: str = "overall") -> dict[str, Any]:
    return table.filter((pl.col("scope") == scope) & (pl.col("method") == method)).row(
        0, named=True)


def test_the_issue_counterexample_reports_agreement_on_the_annotated_essays() -> None:
    """Humans and judge agree (m1 > m2 > m3) on the 2 annotated prompts; on 10 prompts
    nobody annotated the judge reverses the order. Over every judged essay the model
    means are reversed (ρ = τ = −1); on the annotated essays they agree: +1."""
    votes = {(p, a, b): "AAA" for p in ("p0", "p1") for a, b in combinations(MODELS, 2)}
    scores = {(p, m): s for p in ("p0", "p1") for m, s in zip(MODELS, (80, 70, 60), strict=True)}
    reversed_ = dict(zip(MODELS, (10, 50, 90), strict=True))
    scores |= {(f"q{i}", m): reversed_[m] for i in range(10) for m in MODELS}
    judged = judgments(scores)
    everything = judged.group_by("model").agg(pl.col("score_weighted").mean()).sort("model")
    assert stats.spearmanr([3, 2, 1], everything["score_weighted"]).statistic == -1.0

    table = agreement(pairwise(votes), judged)
    model = row(table, MODEL_MEANS)
    assert model["spearman"] == 1.0 and model["kendall"] == 1.0
    assert (model["n_essays"], model["n_prompts"], model["n_models"]) == (6, 2, 3)
    assert model["n_human_rows"] == 6 and model["n_unjudged"] == 0
    per_prompt = row(table, PER_PROMPT)
    assert per_prompt["spearman"] == 1.0 and per_prompt["kendall"] == 1.0
    assert per_prompt["n_used"] == 2
    assert per_prompt["spearman_lo"] is None  # 2 prompts: no interval, not [1, 1]


def _random_study(seed: int, n_prompts: int = 24, n_models: int = 7
                  ) -> tuple[dict[tuple[str, str, str], str], dict[tuple[str, str], float],
                             dict[str, str]]:
    """Annotated prompts a0.. (every pair, 3 annotators voting by a noisy latent quality)
    and unannotated prompts u0..; the judge scores everything with its own noise."""
    rng = np.random.default_rng(seed)
    models = [f"m{k}" for k in range(n_models)]
    quality = dict(zip(models, rng.normal(0, 1, n_models), strict=True))
    genre: dict[str, str] = {}
    votes: dict[tuple[str, str, str], str] = {}
    scores: dict[tuple[str, str], float] = {}
    for i in range(n_prompts):
        p = f"a{i:02d}"
        genre[p] = "narrative" if i % 2 else "argumentative"
        latent = {m: quality[m] + rng.normal(0, 1) for m in models}
        for a, b in combinations(models, 2):
            votes[(p, a, b)] = "".join(
                "T" if abs(d) < 0.3 else "A" if d > 0 else "B"
                for d in (latent[a] - latent[b] + rng.normal(0, 0.8, 3)))
        scores |= {(p, m): round(60 + 8 * latent[m] + rng.normal(0, 6), 1) for m in models}
    for i in range(10):
        genre[f"u{i}"] = "narrative"
        scores |= {(f"u{i}", m): float(rng.uniform(10, 100)) for m in models}
    return votes, scores, genre


def _hand_voting_scores(votes: dict[tuple[str, str, str], str],
                        prompts: set[str]) -> dict[str, float]:
    """Majority of three → (wins + ties/2) / comparisons, counted in plain Python."""
    points: dict[str, float] = defaultdict(float)
    games: Counter[str] = Counter()
    for (p, a, b), verdicts in votes.items():
        if p not in prompts:
            continue
        count = Counter(verdicts)
        outcome = "A" if count["A"] >= 2 else "B" if count["B"] >= 2 else "T"
        points[a] += {"A": 1.0, "B": 0.0, "T": 0.5}[outcome]
        points[b] += {"A": 0.0, "B": 1.0, "T": 0.5}[outcome]
        games[a] += 1
        games[b] += 1
    return {m: points[m] / games[m] for m in games}


def _hand_correlations(votes: dict[tuple[str, str, str], str],
                       scores: dict[tuple[str, str], float],
                       prompts: set[str]) -> tuple[float, float]:
    human = _hand_voting_scores(votes, prompts)
    models = sorted(human)
    judge = [np.mean([scores[(p, m)] for p in prompts]) for m in models]
    h = [human[m] for m in models]
    return stats.spearmanr(h, judge).statistic, stats.kendalltau(h, judge).statistic


def test_model_level_and_per_prompt_correlations_match_scipy() -> None:
    votes, scores, genre = _random_study(seed=4)
    table = agreement(pairwise(votes), judgments(scores, genre), seed=11, n_boot=4000)
    annotated = {p for p, _, _ in votes}
    rho, tau = _hand_correlations(votes, scores, annotated)
    model = row(table, MODEL_MEANS)
    assert model["spearman"] == pytest.approx(rho, abs=1e-12)
    assert model["kendall"] == pytest.approx(tau, abs=1e-12)
    assert (model["n_essays"], model["n_prompts"], model["n_models"]) == (24 * 7, 24, 7)

    per = [_hand_correlations(votes, scores, {p}) for p in sorted(annotated)]
    values = np.array([v for v in per if not math.isnan(v[0])])
    prompt_row = row(table, PER_PROMPT)
    assert prompt_row["n_used"] == len(values) >= MIN_PROMPTS_FOR_CI
    assert prompt_row["spearman"] == pytest.approx(values[:, 0].mean(), abs=1e-12)
    assert prompt_row["kendall"] == pytest.approx(values[:, 1].mean(), abs=1e-12)
    # The interval: a percentile bootstrap over prompts, redone here with another stream.
    rng = np.random.default_rng(999)
    draws = values[rng.integers(0, len(values), (20000, len(values)))].mean(axis=1)
    for k, name in enumerate(("spearman", "kendall")):
        lo, hi = np.quantile(draws[:, k], [0.025, 0.975])
        assert prompt_row[f"{name}_lo"] == pytest.approx(lo, abs=0.02)
        assert prompt_row[f"{name}_hi"] == pytest.approx(hi, abs=0.02)
        assert prompt_row[f"{name}_lo"] < prompt_row[name] < prompt_row[f"{name}_hi"]

    # Per genre: the run's genre of each prompt; the same computations on its prompts.
    narrative = {p for p in annotated if genre[p] == "narrative"}
    rho, tau = _hand_correlations(votes, scores, narrative)
    assert row(table, MODEL_MEANS, "narrative")["spearman"] == pytest.approx(rho, abs=1e-12)
    assert row(table, MODEL_MEANS, "narrative")["kendall"] == pytest.approx(tau, abs=1e-12)
    per_genre = [v for p in sorted(narrative)
                 if not math.isnan((v := _hand_correlations(votes, scores, {p}))[0])]
    assert row(table, PER_PROMPT, "narrative")["spearman"] == pytest.approx(
        np.mean([v[0] for v in per_genre]), abs=1e-12)
    assert table["scope"].unique(maintain_order=True).to_list() == [
        "overall", "argumentative", "narrative"]
    again = agreement(pairwise(votes), judgments(scores, genre), seed=11, n_boot=4000)
    assert again.equals(table)  # seeded


def test_an_annotated_essay_the_judge_failed_is_left_out_of_both_sides() -> None:
    votes, scores, genre = _random_study(seed=5, n_prompts=12, n_models=5)
    failed = ("a03", "m2")
    table = agreement(pairwise(votes), judgments(scores, genre, failed={failed}))
    kept = {k: v for k, v in votes.items() if not (k[0] == failed[0] and failed[1] in k[1:])}
    annotated = {p for p, _, _ in votes}
    human = _hand_voting_scores(kept, annotated)
    judge = {m: np.mean([scores[(p, m)] for p in annotated if (p, m) != failed])
             for m in human}
    models = sorted(human)
    expected = stats.kendalltau([human[m] for m in models], [judge[m] for m in models])
    model = row(table, MODEL_MEANS)
    assert model["kendall"] == pytest.approx(expected.statistic, abs=1e-12)
    assert model["kendall_p"] == pytest.approx(expected.pvalue, abs=1e-12)
    assert model["n_unjudged"] == 1 and model["n_essays"] == 12 * 5 - 1
    assert model["n_human_rows"] == len(kept)


def test_absolute_scores_on_the_annotated_essays() -> None:
    rng = np.random.default_rng(8)
    models = [f"m{k}" for k in range(5)]
    prompts = [f"a{i}" for i in range(12)]
    rows: list[dict[str, object]] = []
    scores: dict[tuple[str, str], float] = {}
    for p in prompts:
        for k, m in enumerate(models):
            scores[(p, m)] = float(rng.uniform(20, 90))
            for who in ("x", "y")[: 1 + (k % 2)]:  # unequal annotators per essay
                rows.append({"prompt_id": p, "model": m, "annotator": who,
                             "score": float(rng.integers(0, 4))})
    scores |= {(f"u{i}", m): 99.0 - 10 * k for i in range(8) for k, m in enumerate(models)}
    annotations = pl.DataFrame(rows)
    table = agreement(annotations, judgments(scores), kind="absolute")
    # Human per-model score: the mean over essays of each essay's mean over annotators.
    essay: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        essay[(str(r["prompt_id"]), str(r["model"]))].append(float(r["score"]))  # type: ignore[arg-type]
    human = [np.mean([np.mean(essay[(p, m)]) for p in prompts]) for m in models]
    judge = [np.mean([scores[(p, m)] for p in prompts]) for m in models]
    model = row(table, MODEL_MEANS)
    assert model["spearman"] == pytest.approx(stats.spearmanr(human, judge).statistic)
    assert model["n_human_rows"] == len(rows) and model["n_essays"] == 60
    per = []
    for p in prompts:
        h = [np.mean(essay[(p, m)]) for m in models]
        if len(set(h)) > 1:
            per.append(stats.kendalltau(h, [scores[(p, m)] for m in models]).statistic)
    prompt_row = row(table, PER_PROMPT)
    assert prompt_row["n_used"] == len(per)
    assert prompt_row["kendall"] == pytest.approx(np.mean(per), abs=1e-12)
