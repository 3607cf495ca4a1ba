"""Spot-check selection: priorities, strata, seeds (synthetic judge rows)."""

from __future__ import annotations

import json
from collections import Counter

import polars as pl
import pytest

from essaybench.bench.spot.sample import SampleParams, priorities, select_items

MODELS = ("m-a", "m-b", "m-c")
GENRES = ("narrative", "argumentative")


def _judged(per_cell: int = 6) -> pl.DataFrame:
    rows = []
    for m_i, model in enumerate(MODELS):
        for genre in GENRES:
            for k in range(per_cell):
                rows.append({
                    "prompt_id": f"{genre}-{k}", "model": model, "sample_index": 0,
                    "genre": genre, "judge": "j", "status": "ok",
                    "score_weighted": 40.0 + 10 * k + m_i,
                    "essay_flags": json.dumps(["fake_verdict"] if k == 5 else []),
                    "judgment_flags": "[]",
                    "score_spread": 15.0 if k == 0 else None, "second_score": None})
    rows.append({**rows[0], "prompt_id": "failed", "status": "parse_error",
                 "score_weighted": None})
    return pl.DataFrame(rows)


def test_priorities_follow_the_definitions() -> None:
    table = priorities(_judged(), SampleParams(n=5, border_margin=5.0))
    assert "failed" not in table["prompt_id"].to_list()  # only scored essays
    by_k = {(r["model"], r["prompt_id"]): r["priority"] for r in table.iter_rows(named=True)}
    for model in MODELS:
        for genre in GENRES:
            # scores 40+10k (+model offset): per-model median over both genres = 65 + m_i
            assert by_k[(model, f"{genre}-5")] == "flagged"
            assert by_k[(model, f"{genre}-0")] == "disputed"  # spread 15 ≥ 10
            assert by_k[(model, f"{genre}-2")] == "borderline"  # |60 - 65| = 5 ≤ 5
            assert by_k[(model, f"{genre}-3")] == "borderline"
            assert by_k[(model, f"{genre}-1")] == "other"  # 15 from the median


def test_second_opinion_gap_counts_as_dispute() -> None:
    judged = _judged().with_columns(
        pl.when(pl.col("prompt_id") == "narrative-1").then(pl.col("score_weighted") + 12.0)
        .otherwise(None).alias("second_score"))
    table = priorities(judged, SampleParams(n=1))
    assert set(table.filter(pl.col("prompt_id") == "narrative-1")["priority"]) == {"disputed"}


def test_strata_balanced_and_priority_first() -> None:
    items = select_items(_judged(), SampleParams(n=12, seed=1))
    assert items.height == 12
    assert set(Counter(items["stratum"].to_list()).values()) == {2}  # 6 strata × 2
    # within each stratum, the flagged essay comes first, then the disputed one
    for _, group in items.group_by("stratum", maintain_order=True):
        assert group["priority"].to_list() == ["flagged", "disputed"]


def test_seeded_and_reproducible() -> None:
    params = SampleParams(n=9, seed=7)
    first = select_items(_judged(), params)
    assert first.equals(select_items(_judged(), params))
    picks = {tuple(select_items(_judged(), SampleParams(n=30, seed=s))
                   .filter(pl.col("priority") == "other")["prompt_id"].to_list())
             for s in range(6)}
    assert len(picks) > 1  # the order within a priority follows the seed


def test_n_larger_than_the_run_takes_everything_once() -> None:
    items = select_items(_judged(), SampleParams(n=1000))
    assert items.height == len(MODELS) * len(GENRES) * 6
    assert items.select("prompt_id", "model").is_unique().all()


def test_several_judges_refused() -> None:
    two = pl.concat([_judged(), _judged().with_columns(pl.lit("k").alias("judge"))])
    with pytest.raises(ValueError, match="one judge"):
        select_items(two, SampleParams(n=3))
