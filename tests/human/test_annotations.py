"""Annotation files: both formats from JSONL and CSV, and errors that name file, line and field."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import polars as pl
import pytest

from essaybench.human.annotations import (
    ABSOLUTE_SCHEMA,
    DEFAULT_SCALE,
    PAIRWISE_SCHEMA,
    AnnotationFileError,
    ScoreScale,
    load_absolute,
    load_pairwise,
)


def jsonl(tmp_path: Path, rows: Sequence[object], name: str = "ann.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n",
                    encoding="utf-8")
    return path


def csv_file(tmp_path: Path, text: str, name: str = "ann.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


PAIR = {"prompt_id": "p1", "model_a": "m1", "model_b": "m2", "annotator": "zhang",
        "verdict": "A", "genre": "narrative"}


def test_pairwise_jsonl_loads_with_lines(tmp_path: Path) -> None:
    rows = [PAIR, {**PAIR, "annotator": "li", "verdict": "tie"},
            {**PAIR, "annotator": "wang", "verdict": "B", "genre": None}]
    path = jsonl(tmp_path, rows)
    df = load_pairwise(path)
    assert df.schema == pl.Schema(PAIRWISE_SCHEMA)
    assert df["verdict"].to_list() == ["A", "tie", "B"]
    assert df["line"].to_list() == [1, 2, 3]
    assert df["genre"].to_list() == ["narrative", "narrative", None]


def test_pairwise_csv_with_blank_optional_genre(tmp_path: Path) -> None:
    path = csv_file(tmp_path, "prompt_id,model_a,model_b,annotator,verdict,genre\n"
                              "p1,m1,m2,zhang,A,\n\n"
                              "p1,m1,m2,li,B,narrative\n")
    df = load_pairwise(path)
    assert df["genre"].to_list() == [None, "narrative"]
    assert df["line"].to_list() == [2, 4]  # the blank line 3 is skipped, not miscounted


def test_absolute_csv_and_jsonl_agree(tmp_path: Path) -> None:
    text = "prompt_id,model,annotator,score\np1,m1,zhang,3\np1,m2,zhang,1.5\n"
    from_csv = load_absolute(csv_file(tmp_path, text))
    from_jsonl = load_absolute(jsonl(tmp_path, [
        {"prompt_id": "p1", "model": "m1", "annotator": "zhang", "score": 3},
        {"prompt_id": "p1", "model": "m2", "annotator": "zhang", "score": 1.5}]))
    assert from_csv.schema == pl.Schema(ABSOLUTE_SCHEMA)
    assert from_csv.drop("line").equals(from_jsonl.drop("line"))
    assert from_csv["score"].to_list() == [3.0, 1.5]


@pytest.mark.parametrize(("change", "field", "needle"), [
    ({"verdict": "C"}, "verdict", "'A', 'B' or 'tie'"),
    ({"model_b": "m1"}, "", "same model 'm1'"),
    ({"annotator": "  "}, "annotator", "at least 1 character"),
    ({"judge": "x"}, "judge", "Extra inputs are not permitted"),
])
def test_pairwise_invalid_row_names_file_line_and_field(
        tmp_path: Path, change: dict[str, str], field: str, needle: str) -> None:
    path = jsonl(tmp_path, [PAIR, {**PAIR, "annotator": "li", **change}])
    with pytest.raises(AnnotationFileError) as err:
        load_pairwise(path)
    message = str(err.value)
    assert f"{path}:2:" in message
    assert f"{path}:1:" not in message  # the valid row is not blamed
    if field:
        assert f"field {field!r}" in message
    assert needle in message


def test_missing_field_in_csv(tmp_path: Path) -> None:
    path = csv_file(tmp_path, "prompt_id,model,annotator,score\np1,m1,zhang,\n")
    with pytest.raises(AnnotationFileError, match=r"ann\.csv:2: field 'score': Field required"):
        load_absolute(path)


@pytest.mark.parametrize("score", ["nan", "inf", "three"])
def test_bad_absolute_score(tmp_path: Path, score: str) -> None:
    path = csv_file(tmp_path, f"prompt_id,model,annotator,score\np1,m1,zhang,{score}\n")
    with pytest.raises(AnnotationFileError, match=r"ann\.csv:2: field 'score'"):
        load_absolute(path)


def test_reversed_pair_by_same_annotator_is_a_duplicate(tmp_path: Path) -> None:
    rows = [PAIR, {**PAIR, "model_a": "m2", "model_b": "m1", "verdict": "B"}]
    with pytest.raises(AnnotationFileError, match=r"ann\.jsonl:2: duplicate of line 1"):
        load_pairwise(jsonl(tmp_path, rows))


def test_conflicting_genre_for_one_prompt(tmp_path: Path) -> None:
    rows = [PAIR, {**PAIR, "annotator": "li", "genre": "expository"}]
    with pytest.raises(AnnotationFileError) as err:
        load_pairwise(jsonl(tmp_path, rows))
    assert "ann.jsonl:2: field 'genre'" in str(err.value)
    assert "'narrative' at line 1" in str(err.value)


def test_not_json_not_object_unknown_suffix_missing_and_empty(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(PAIR) + "\n{oops\n", encoding="utf-8")
    with pytest.raises(AnnotationFileError, match=r"bad\.jsonl:2: not valid JSON"):
        load_pairwise(bad)
    with pytest.raises(AnnotationFileError, match=r"ann\.jsonl:1: expected an object, got list"):
        load_pairwise(jsonl(tmp_path, [[1, 2]]))
    with pytest.raises(AnnotationFileError, match=r"unknown annotation file type '\.txt'"):
        load_pairwise(csv_file(tmp_path, "x", name="ann.txt"))
    with pytest.raises(AnnotationFileError, match="not found"):
        load_pairwise(tmp_path / "absent.csv")
    with pytest.raises(AnnotationFileError, match="no annotations"):
        load_pairwise(csv_file(tmp_path, "prompt_id,model_a,model_b,annotator,verdict\n"))


def test_extra_csv_cells_and_many_errors_are_capped(tmp_path: Path) -> None:
    path = csv_file(tmp_path, "prompt_id,model,annotator,score\np1,m1,zhang,1,extra\n")
    with pytest.raises(AnnotationFileError, match=r"ann\.csv:2: more cells than header"):
        load_absolute(path)
    rows = [{"prompt_id": f"p{i}", "model": "m", "annotator": "a", "score": "x"}
            for i in range(30)]
    with pytest.raises(AnnotationFileError) as err:
        load_absolute(jsonl(tmp_path, rows))
    assert "... and 10 more" in str(err.value)


# -- the declared scale (issue 13: 99 and -5 were accepted, 1e300 crashed the stage) -------


@pytest.mark.parametrize("score", ["99", "-5", "1e300", "10.5"])
def test_scores_off_the_scale_name_file_and_line(tmp_path: Path, score: str) -> None:
    path = csv_file(tmp_path, f"prompt_id,model,annotator,score\np1,m1,zhang,3\n"
                              f"p1,m2,zhang,{score}\n")
    with pytest.raises(AnnotationFileError) as err:
        load_absolute(path, DEFAULT_SCALE)
    message = str(err.value)
    assert f"{path}:3: field 'score': {float(score):g} is outside the scale 0–10" in message
    assert f"{path}:2" not in message


@pytest.mark.parametrize("score", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_json_scores_name_file_and_line(tmp_path: Path, score: str) -> None:
    path = tmp_path / "ann.jsonl"
    path.write_text('{"prompt_id": "p1", "model": "m1", "annotator": "a", "score": 2}\n'
                    f'{{"prompt_id": "p1", "model": "m2", "annotator": "a", "score": {score}}}\n',
                    encoding="utf-8")
    with pytest.raises(AnnotationFileError, match=r"ann\.jsonl:2: field 'score'"):
        load_absolute(path, DEFAULT_SCALE)


def test_a_declared_scale_is_the_one_checked(tmp_path: Path) -> None:
    path = csv_file(tmp_path, "prompt_id,model,annotator,score\np1,m1,a,0\np1,m2,a,3\n")
    assert load_absolute(path, ScoreScale.parse("0-3"))["score"].to_list() == [0.0, 3.0]
    with pytest.raises(AnnotationFileError, match=r"ann\.csv:3: .*outside the scale 1–2"):
        load_absolute(path, ScoreScale.parse("1..2"))
    assert load_absolute(path, None).height == 2  # no scale: any finite number


@pytest.mark.parametrize(("text", "low", "high"), [
    ("0-3", 0, 3), ("1-10", 1, 10), (" -2 - 2 ", -2, 2), ("0..100", 0, 100), ("0.5–4.5", 0.5, 4.5),
])
def test_scale_parses(text: str, low: float, high: float) -> None:
    assert ScoreScale.parse(text) == ScoreScale(low, high)


@pytest.mark.parametrize("text", ["3", "a-b", "3-1", "1-1", "0-1e400"])
def test_bad_scales_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        ScoreScale.parse(text)
