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
    CROSS_GENRE,
    MIN_PROMPTS_FOR_CI,
    MODEL_MEANS,
    PER_PROMPT,
    judge_human_agreement,
    match_essays,
)
from essaybench.human.voting import judge_scores

MODELS = ["m1", "m2", "m3"]


def judgments(scores: Mapping[tuple[str, str], float], genre: dict[str, str] | None = None,
              failed: set[tuple[str, str]] | None = None,
              chosen: Mapping[tuple[str, str], str] | None = None,
              judge: str = "j") -> pl.DataFrame:
    """One judge's rows: ``scores[(prompt, model)]``; ``failed`` essays are parse_error;
    ``chosen[(prompt, model)]``: the genre an open prompt's essay was judged as."""
    failed = failed or set()
    return pl.DataFrame(
        [{"judge": judge, "prompt_id": p, "model": m, "sample_index": 0,
          "genre": (chosen or {}).get((p, m), (genre or {}).get(p, "narrative")),
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
                           judge_scores(judged, judge="j"))
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
    # The interval (issue 25 item 11): scipy's one-sample t-interval over the prompts'
    # correlations, not a percentile bootstrap.
    for k, name in enumerate(("spearman", "kendall")):
        ci = stats.ttest_1samp(values[:, k], 0.0).confidence_interval(0.95)
        assert prompt_row[f"{name}_lo"] == pytest.approx(ci.low, rel=1e-10)
        assert prompt_row[f"{name}_hi"] == pytest.approx(ci.high, rel=1e-10)
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


def _open_prompt_study() -> tuple[pl.DataFrame, pl.DataFrame]:
    """p1 narrative and p2 argumentative (models m1–m3), and the open prompt o (文体不限)
    whose essays chose two genres: m1, m2 narrative; m3, m4 argumentative."""
    votes = {("p1", "m1", "m2"): "AAA", ("p1", "m1", "m3"): "AAA", ("p1", "m2", "m3"): "AAA",
             ("p2", "m1", "m2"): "BBB", ("p2", "m1", "m3"): "BBB", ("p2", "m2", "m3"): "BBB",
             ("o", "m1", "m2"): "BBB",  # narrative vs narrative
             ("o", "m3", "m4"): "BBB",  # argumentative vs argumentative
             ("o", "m1", "m3"): "AAA", ("o", "m1", "m4"): "BBB",  # across genres
             ("o", "m2", "m3"): "AAA", ("o", "m2", "m4"): "ABT"}
    scores = {("p1", "m1"): 80, ("p1", "m2"): 70, ("p1", "m3"): 60,
              ("p2", "m1"): 40, ("p2", "m2"): 55, ("p2", "m3"): 70,
              ("o", "m1"): 50, ("o", "m2"): 90, ("o", "m3"): 30, ("o", "m4"): 85}
    chosen = {("o", "m1"): "narrative", ("o", "m2"): "narrative",
              ("o", "m3"): "argumentative", ("o", "m4"): "argumentative"}
    judged = judgments({k: float(v) for k, v in scores.items()},
                       {"p1": "narrative", "p2": "argumentative"}, chosen=chosen)
    return pairwise(votes), judged


def test_an_open_prompts_essays_count_in_the_genre_they_were_judged_as() -> None:
    """Worked by hand. narrative: the p1 votes and o's m1–m2 vote. Human voting scores
    m1 2/3, m2 2/3, m3 0; judge means over the narrative essays m1 (80+50)/2 = 65,
    m2 (70+90)/2 = 80, m3 60. Ranks (2.5, 2.5, 1) vs (2, 3, 1): ρ = 1.5/√(1.5·2) = √3/2;
    τ-b = 2/√((3−1)·3) = 2/√6.
    argumentative: the p2 votes and o's m3–m4 vote. Human m1 0, m2 1/2, m3 2/3, m4 1;
    judge m1 40, m2 55, m3 (70+30)/2 = 50, m4 85: one swapped pair, ρ = 1 − 6·2/60 = 0.8,
    τ = (5−1)/6.
    cross-genre: o's four votes between a narrative and an argumentative essay. Human
    m1 1/2, m2 3/4, m3 0, m4 3/4; judge 50, 90, 30, 85: ρ = 4.5/√(4.5·5) = 3/√10,
    τ-b = 5/√(5·6) = 5/√30. Per prompt: p1 and p2 agree fully (1, 1); o's part in either
    genre has 2 models (undefined); o's cross-genre part is the cross-genre figures."""
    annotations, judged = _open_prompt_study()
    table = agreement(annotations, judged)
    assert table["scope"].unique(maintain_order=True).to_list() == [
        "overall", "argumentative", "narrative", CROSS_GENRE]
    expected = {"narrative": (math.sqrt(3) / 2, 2 / math.sqrt(6)),
                "argumentative": (0.8, 2 / 3),
                CROSS_GENRE: (3 / math.sqrt(10), 5 / math.sqrt(30))}
    for scope, (rho, tau) in expected.items():
        model = row(table, MODEL_MEANS, scope)
        assert model["spearman"] == pytest.approx(rho, abs=1e-12), scope
        assert model["kendall"] == pytest.approx(tau, abs=1e-12), scope
    counts = {scope: (row(table, MODEL_MEANS, scope)["n_essays"],
                      row(table, MODEL_MEANS, scope)["n_prompts"],
                      row(table, MODEL_MEANS, scope)["n_models"],
                      row(table, MODEL_MEANS, scope)["n_human_rows"])
              for scope in ("overall", "narrative", "argumentative", CROSS_GENRE)}
    assert counts == {"overall": (10, 3, 4, 12), "narrative": (5, 2, 3, 4),
                      "argumentative": (5, 2, 4, 4), CROSS_GENRE: (4, 1, 4, 4)}
    # Every vote in exactly one scope besides overall; every essay in at least one.
    assert sum(c[3] for s, c in counts.items() if s != "overall") == counts["overall"][3]
    for scope, value in (("narrative", 1.0), ("argumentative", 1.0),
                         (CROSS_GENRE, 3 / math.sqrt(10))):
        per_prompt = row(table, PER_PROMPT, scope)
        assert per_prompt["spearman"] == pytest.approx(value, abs=1e-12), scope
        assert per_prompt["n_used"] == 1 and per_prompt["spearman_lo"] is None
    # Overall, o's whole prompt (six votes): human m1 1/3, m2 5/6, m3 0, m4 5/6.
    overall = row(table, PER_PROMPT)
    assert overall["n_used"] == 3
    assert overall["spearman"] == pytest.approx((1 + 1 + 3 / math.sqrt(10)) / 3, abs=1e-12)


def test_per_genre_agreement_does_not_depend_on_row_order() -> None:
    """The bug: an open prompt was filed under the genre of whichever judgment row came
    first, so shuffling the rows moved its essays between genres."""
    annotations, judged = _open_prompt_study()
    reference = agreement(annotations, judged)
    for seed in range(12):
        shuffled_judged = judged.sample(fraction=1.0, shuffle=True, seed=seed)
        shuffled_votes = annotations.sample(fraction=1.0, shuffle=True, seed=100 + seed)
        assert agreement(shuffled_votes, shuffled_judged).equals(reference), seed


def test_absolute_scores_of_an_open_prompt_split_by_the_essays_genres() -> None:
    """Absolute annotations: each essay in the genre it was judged as; no cross-genre
    scope (nothing compares two essays); the genres' essays add up to overall's."""
    scores = {("p1", "m1"): 80.0, ("p1", "m2"): 70.0, ("p1", "m3"): 60.0,
              ("o", "m1"): 50.0, ("o", "m2"): 90.0, ("o", "m3"): 30.0, ("o", "m4"): 85.0}
    human = {("p1", "m1"): 3, ("p1", "m2"): 2, ("p1", "m3"): 1,
             ("o", "m1"): 1, ("o", "m2"): 3, ("o", "m3"): 0, ("o", "m4"): 2}
    annotations = pl.DataFrame([{"prompt_id": p, "model": m, "annotator": "x", "score": float(s)}
                                for (p, m), s in human.items()])
    chosen = {("o", "m1"): "narrative", ("o", "m2"): "narrative",
              ("o", "m3"): "argumentative", ("o", "m4"): "argumentative"}
    judged = judgments(scores, {"p1": "narrative"}, chosen=chosen)
    table = agreement(annotations, judged, kind="absolute")
    assert table["scope"].unique(maintain_order=True).to_list() == [
        "overall", "argumentative", "narrative"]
    narrative = row(table, MODEL_MEANS, "narrative")
    # Human m1 (3+1)/2 = 2, m2 (2+3)/2 = 2.5, m3 1; judge m1 65, m2 80, m3 60: ρ = 1.
    assert (narrative["n_essays"], narrative["n_prompts"], narrative["spearman"]) == (5, 2, 1.0)
    argumentative = row(table, MODEL_MEANS, "argumentative")
    assert (argumentative["n_essays"], argumentative["n_used"]) == (2, 2)  # 2 models: no ρ
    assert math.isnan(argumentative["spearman"])
    assert row(table, MODEL_MEANS)["n_essays"] == 7 == 5 + 2
    shuffled = judged.sample(fraction=1.0, shuffle=True, seed=3)
    assert agreement(annotations.reverse(), shuffled, kind="absolute").equals(table)


def test_each_judge_places_an_open_prompts_essay_where_it_judged_it() -> None:
    """The genre call is per judge: judge k scored o's m1 essay as argumentative, so in
    k's table it is argumentative, in j's narrative — whatever the other judge said."""
    annotations, judged_j = _open_prompt_study()
    judged_k = judged_j.with_columns(
        pl.lit("k").alias("judge"),
        pl.when((pl.col("prompt_id") == "o") & (pl.col("model") == "m1"))
        .then(pl.lit("argumentative")).otherwise(pl.col("genre")).alias("genre"))
    both = pl.concat([judged_k, judged_j])  # k's rows first
    for judge, genre in (("j", "narrative"), ("k", "argumentative")):
        matched = match_essays(annotations, "pairwise", judge_scores(both, judge=judge))
        essay = matched.essays.filter((pl.col("prompt_id") == "o") & (pl.col("model") == "m1"))
        assert essay["genre"].to_list() == [genre]
    with pytest.raises(ValueError, match="several genres' rubrics"):
        match_essays(annotations, "pairwise", judge_scores(both.drop("judge")))


def test_an_undefined_correlation_says_why_and_prints_as_a_dash() -> None:
    """Issue 25, item 17: the agreement table printed a bare ``nan``."""
    from essaybench.core.export import markdown_table

    two = ["m1", "m2"]
    votes = {("p0", "m1", "m2"): "AAA"}
    table = agreement(pairwise(votes), judgments({("p0", m): s for m, s in
                                                  zip(two, (80, 70), strict=True)}))
    model, per_prompt = row(table, MODEL_MEANS), row(table, PER_PROMPT)
    assert math.isnan(model["spearman"]) and math.isnan(per_prompt["kendall"])
    assert model["note"] == ("undefined: 2 model(s) scored by both, a rank correlation "
                             "needs 3")
    assert per_prompt["note"] == ("undefined: no prompt with a correlation (each needs 3 "
                                  "models scored by both, not all alike)")
    alike = {(p, a, b): "TTT" for p in ("p0",) for a, b in combinations(MODELS, 2)}
    tied = agreement(pairwise(alike), judgments({("p0", m): s for m, s in
                                                 zip(MODELS, (80, 70, 60), strict=True)}))
    assert row(tied, MODEL_MEANS)["note"] == "undefined: the humans scored every model alike"
    defined = agreement(pairwise({(p, a, b): "AAA" for p in ("p0", "p1")
                                  for a, b in combinations(MODELS, 2)}),
                        judgments({(p, m): s for p in ("p0", "p1")
                                   for m, s in zip(MODELS, (80, 70, 60), strict=True)}))
    assert row(defined, MODEL_MEANS)["note"] is None
    markdown = markdown_table(table.select("method", "spearman", "note"), "t")
    assert "nan" not in markdown.lower() and "| — | undefined: 2 model(s)" in markdown
