"""The anchor set as shipped, and its sample."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from essaybench.bench.anchors import anchor_essays, load_anchor_set, sample_anchors
from essaybench.bench.rubrics import RubricError
from essaybench.core.contracts import GENRES


def test_the_shipped_set_spans_genres_and_levels_evenly() -> None:
    anchors = load_anchor_set()
    assert len(anchors.essays) == 24
    cells = Counter((e.genre, e.level) for e in anchors.essays)
    assert cells == {(g, lv): 2 for g in GENRES for lv in ("high", "mid", "low")}
    assert anchors.label.startswith("essay_anchors.v1@") and len(anchors.fingerprint) == 16


def test_a_sample_spans_genres_and_levels_and_is_reproducible() -> None:
    anchors = load_anchor_set()
    four = sample_anchors(anchors, 4, 0)
    assert sorted(e.genre for e in four) == sorted(GENRES)
    assert {e.level for e in four} == {"high", "mid", "low"}
    assert [e.id for e in four] == [e.id for e in sample_anchors(anchors, 4, 0)]
    twelve = sample_anchors(anchors, 12, 0)
    assert Counter(e.genre for e in twelve) == dict.fromkeys(GENRES, 3)
    assert all(Counter(e.level for e in twelve if e.genre == g) == {"high": 1, "mid": 1,
                                                                    "low": 1} for g in GENRES)
    assert len(sample_anchors(anchors, None, 0)) == 24


def test_the_anchors_read_as_the_judge_stage_reads_essays() -> None:
    frame = anchor_essays(sample_anchors(load_anchor_set(), 4, 0))
    assert frame["status"].to_list() == ["ok"] * 4 and set(frame["model"]) == {"anchor"}
    assert frame["prompt_id"].n_unique() == 4


def test_an_edited_or_malformed_set_is_refused_or_fingerprinted_anew(tmp_path: Path) -> None:
    source = yaml.safe_load((Path(__file__).resolve().parents[2] / "rubrics" / "anchors"
                             / "essay_anchors.v1.yaml").read_text(encoding="utf-8"))
    edited = tmp_path / "edited.yaml"
    source["essays"][0]["essay"] += "。"
    edited.write_text(yaml.safe_dump(source, allow_unicode=True), encoding="utf-8")
    assert load_anchor_set(edited).fingerprint != load_anchor_set().fingerprint
    source["essays"][1]["id"] = source["essays"][0]["id"]
    source["essays"][2]["genre"] = "poetry"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(source, allow_unicode=True), encoding="utf-8")
    with pytest.raises(RubricError, match=r"poetry|duplicate"):
        load_anchor_set(bad)
