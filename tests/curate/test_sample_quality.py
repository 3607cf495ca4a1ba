"""Filter and classification quality on the bundled sample, against the team's labels.

``data/sample_labels.jsonl`` labels every chatbot-log turn and exam-CSV row of the sample
(essay with genre and set, noise with its kind, or malformed). The rules were written
with this sample in view, so these figures are a regression guard, not a measure of how
the rules generalise; ``test_real_data.py`` runs on data nobody here wrote.
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from essaybench.core.contracts import kept_rows
from essaybench.core.paths import PROJECT_ROOT
from essaybench.curate.classify import run_classify
from essaybench.curate.collect import run_collect
from essaybench.curate.config import load_curate_config
from essaybench.curate.filter import run_filter

MIN_ESSAY_RECALL = 0.95
MIN_NOISE_REJECTION = 0.95
MIN_GENRE_ACCURACY = 0.95
MIN_SET_ACCURACY = 0.95


@pytest.fixture(scope="module")
def outcome() -> list[tuple[dict[str, str], dict[str, str | None]]]:
    config = load_curate_config(PROJECT_ROOT / "configs" / "curate.yaml")
    collected = run_collect(config.load_sources()).table
    filtered = run_filter(kept_rows(collected), config.filter).table
    classified = run_classify(kept_rows(filtered), config.classify).table
    final = {r["record_id"]: r for r in classified.iter_rows(named=True)}
    decided = {r["record_id"]: r for r in filtered.iter_rows(named=True)}
    pairs = []
    for line in (PROJECT_ROOT / "data" / "sample_labels.jsonl").read_text("utf-8").splitlines():
        label = json.loads(line)
        rows = collected.filter(pl.col("source") == label["source"])
        key = ("locator", label["locator"]) if "locator" in label else (
            "source_ref", label["source_ref"])
        match = rows.filter(pl.col(key[0]) == key[1])
        assert match.height == 1, f"label {label} matches {match.height} records"
        record = match.row(0, named=True)
        rid = record["record_id"]
        pairs.append((label, final.get(rid) or decided.get(rid) or record))
    return pairs


def test_labels_cover_the_sample(outcome: list[tuple[dict[str, str], dict[str, str]]]) -> None:
    assert len(outcome) == 279  # 199 chat-log records + 80 CSV rows


def test_malformed_records_are_quarantined(
    outcome: list[tuple[dict[str, str], dict[str, str]]],
) -> None:
    for label, row in outcome:
        if label["expect"] == "quarantined":
            assert row["decision"] == "quarantined", label


def test_filter_keeps_essays_and_drops_noise(
    outcome: list[tuple[dict[str, str], dict[str, str]]],
) -> None:
    essays = [row for label, row in outcome if label["expect"] == "essay"]
    noise = [row for label, row in outcome if label["expect"] == "dropped"]
    recall = sum(r["decision"] != "filtered" for r in essays) / len(essays)
    rejection = sum(r["decision"] == "filtered" for r in noise) / len(noise)
    assert recall >= MIN_ESSAY_RECALL, recall
    assert rejection >= MIN_NOISE_REJECTION, rejection


def test_rules_label_genre_and_set(outcome: list[tuple[dict[str, str], dict[str, str]]]) -> None:
    labelled = [(label, row) for label, row in outcome
                if label["expect"] == "essay" and row.get("genre") is not None]
    essays = [label for label, _ in outcome if label["expect"] == "essay"]
    assert len(labelled) >= 0.95 * len(essays)  # rules alone decide almost all genres
    genre = sum(label["genre"] == row["genre"] for label, row in labelled) / len(labelled)
    pset = sum(label["prompt_set"] == row["prompt_set"] for label, row in labelled) / len(labelled)
    assert genre >= MIN_GENRE_ACCURACY, genre
    assert pset >= MIN_SET_ACCURACY, pset
