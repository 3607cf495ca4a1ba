"""Annotations against the run (issue 13: unknown essay ids and model names were accepted
silently and the report was written with NaN correlations)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from essaybench.human.annotations import AnnotationFileError, load_pairwise
from essaybench.human.run_check import RunEssays, check_against_run, load_checked, write_jsonl

# Run r1: m1 wrote p1 and p2, m2 wrote p1 only.
JUDGMENTS = pl.DataFrame({"prompt_id": ["p1", "p1", "p2", "p1"],
                          "model": ["m1", "m2", "m1", "m1"],
                          "judge": ["j", "j", "j", "k"], "status": ["ok", "ok", "api_error", "ok"]})
RUN = RunEssays.from_judgments("r1", JUDGMENTS)


def _write(tmp_path: Path, rows: list[dict[str, object]], name: str = "ann.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _score(prompt: str, model: str, who: str = "a", score: float = 2) -> dict[str, object]:
    return {"prompt_id": prompt, "model": model, "annotator": who, "score": score}


ABSOLUTE = [_score("p1", "m1"), _score("p1", "m2"), _score("p1", "ghost"), _score("p99", "m1"),
            _score("p2", "m2"), _score("p1", "ghost", "b")]


def test_run_essays_from_a_judge_snapshot() -> None:
    assert RUN.prompts == {"p1", "p2"} and RUN.models == {"m1", "m2"}
    assert RUN.essays == {("p1", "m1"), ("p1", "m2"), ("p2", "m1")}


def test_unknown_models_prompts_and_essays_name_file_lines_and_values(tmp_path: Path) -> None:
    path = _write(tmp_path, ABSOLUTE)
    with pytest.raises(AnnotationFileError) as err:
        load_checked(path, "absolute", RUN)
    message = str(err.value)
    assert "\n" not in message  # one line
    assert message.startswith(f"{path}:3: 4 annotation row(s) name what run r1 does not have")
    assert "unknown models 'ghost' (lines 3, 6)" in message
    assert "unknown prompts 'p99' (line 4)" in message
    assert "essays not in the run (p2, m2) (line 5)" in message
    assert "--ignore-unknown" in message


def test_ignore_unknown_drops_and_counts(tmp_path: Path) -> None:
    path = _write(tmp_path, ABSOLUTE)
    checked = load_checked(path, "absolute", RUN, ignore_unknown=True)
    assert checked.table["line"].to_list() == [1, 2] and checked.dropped == 4
    assert checked.note.startswith(f"{path}: ignored 4 annotation row(s) name what run r1")
    clean = load_checked(_write(tmp_path, ABSOLUTE[:2], "ok.jsonl"), "absolute", RUN)
    assert (clean.dropped, clean.note, clean.table.height) == (0, "", 2)


def test_pairwise_rows_are_checked_on_both_models(tmp_path: Path) -> None:
    pair: dict[str, object] = {"prompt_id": "p1", "model_a": "m1", "model_b": "m2",
                               "annotator": "a", "verdict": "A"}
    path = _write(tmp_path, [pair, {**pair, "model_b": "m9"}, {**pair, "model_a": "m8",
                                                                 "annotator": "b"}])
    with pytest.raises(AnnotationFileError,
                       match=r"ann\.jsonl:2: 2 annotation row\(s\) .* unknown models 'm9', "
                             r"'m8' \(lines 2, 3\)"):
        load_checked(path, "pairwise", RUN)
    assert load_checked(path, "pairwise", RUN, ignore_unknown=True).table.height == 1


def test_nothing_left_after_ignoring_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path, [_score("p7", "m1")])
    with pytest.raises(AnnotationFileError, match=r"ann\.jsonl: no annotation row names an "
                                                  r"essay of run r1"):
        load_checked(path, "absolute", RUN, ignore_unknown=True)


def test_scores_are_checked_against_the_default_scale_when_none_is_declared(
        tmp_path: Path) -> None:
    path = _write(tmp_path, [_score("p1", "m1", score=99)])
    with pytest.raises(AnnotationFileError, match=r"ann\.jsonl:1: field 'score': 99 is "
                                                  r"outside the scale 0–10"):
        load_checked(path, "absolute", RUN)


def test_checked_rows_written_back_load_equal(tmp_path: Path) -> None:
    pair: dict[str, object] = {"prompt_id": "p1", "model_a": "m1", "model_b": "m2",
                               "annotator": "a", "verdict": "tie", "genre": "narrative"}
    table = load_pairwise(_write(tmp_path, [pair, {**pair, "annotator": "b", "genre": None}]))
    again = load_pairwise(write_jsonl(table, tmp_path / "out" / "checked.jsonl"))
    assert again.equals(table)


def test_direct_check_of_a_loaded_table(tmp_path: Path) -> None:
    table = pl.DataFrame({"prompt_id": ["p1"], "model": ["m3"], "annotator": ["a"],
                          "score": [1.0], "line": [7]})
    with pytest.raises(AnnotationFileError, match=r"^x\.csv:7: .*unknown models 'm3'"):
        check_against_run(table, "absolute", RUN, "x.csv")


def test_a_sample_the_run_does_not_have_is_named(tmp_path: Path) -> None:
    """Issue 16: annotations name the sample they read (default 0); judge and humans are
    compared on the same samples, so a sample the run lacks is an error like a prompt."""
    judged = JUDGMENTS.with_columns(pl.Series("sample_index", [0, 1, 0, 0]))
    run = RunEssays.from_judgments("r1", judged)
    rows = [{**_score("p1", "m1"), "sample_index": 0}, {**_score("p1", "m2"), "sample_index": 1},
            {**_score("p2", "m1"), "sample_index": 1}]
    with pytest.raises(AnnotationFileError, match=r"ann\.jsonl:3: .*essays not in the run "
                                                  r"\(p2, m1, sample 1\) \(line 3\)"):
        load_checked(_write(tmp_path, rows), "absolute", run)
    checked = load_checked(_write(tmp_path, rows[:2]), "absolute", run)
    assert checked.table["sample_index"].to_list() == [0, 1]
    assert load_checked(_write(tmp_path, [_score("p1", "m1")]), "absolute",
                        run).table["sample_index"].to_list() == [0]  # absent: sample 0
