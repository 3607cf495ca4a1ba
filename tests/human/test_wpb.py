"""The WritingPreferenceBench loader: a synthetic directory, its errors, and CJK counting."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import polars as pl
import pytest

from essaybench.constraints.counting import count_chinese_chars
from essaybench.human.wpb import RESPONSE_SCHEMA, WpbDataError, cjk_chars, load_wpb, model_name
from tests.human.conftest import MakeWpb


def by_unicode_name(text: str) -> int:
    return sum(1 for ch in text if unicodedata.name(ch, "").startswith("CJK UNIFIED IDEOGRAPH")
               or ch == "〇" or unicodedata.name(ch, "").startswith("CJK COMPATIBILITY IDEOGRAPH"))


@pytest.mark.parametrize("text", [
    "", "写作abc，123。", "二〇二四年 𠀀𪜀 豈 🙂 ｡ｶ", "ㄅㄆ ぁア 한글"])
def test_cjk_chars_matches_other_counts(text: str) -> None:
    assert cjk_chars(text) == count_chinese_chars(text) == by_unicode_name(text)


def test_model_name_drops_directory_suffix() -> None:
    assert model_name("OpenAI-o3-high.code_zlzv5xdl78683ba77d") == "OpenAI-o3-high.code"
    assert model_name("plain") == "plain"


def test_load_synthetic_directory(make_wpb: MakeWpb) -> None:
    data = load_wpb(make_wpb(n_prompts=5, n_models=3, alt_models=1))
    rows = data.responses
    assert rows.schema == pl.Schema(RESPONSE_SCHEMA)
    assert rows.height == 15 and data.prompts.height == 5
    assert sorted(rows["model"].unique()) == ["Model-0", "Model-1", "Model-2"]
    assert rows.filter(pl.col("score_alt").is_not_null())["model"].unique().to_list() == [
        "Model-0"]
    assert data.models["has_alt"].to_list() == [True, False, False]
    text = rows["predict0"][0]
    assert rows["cjk_chars"][0] == by_unicode_name(text) == len(text) - 9  # "，abc 123。"


def _rewrite(folder: Path, name: str, edit: dict[str, object], line: int = 2) -> None:
    path = folder / name
    rows = [json.loads(t) for t in path.read_text(encoding="utf-8").splitlines()]
    rows[line - 1] |= edit
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")


@pytest.mark.parametrize(("edit", "needle"), [
    ({"score": 4}, "field 'score': Input should be less than or equal to 3"),
    ({"score": "2"}, "field 'score': Input should be a valid integer"),
    ({"extra": 1}, "field 'extra': Extra inputs are not permitted"),
    ({"question_id": "nope"}, "question_id 'nope' not in prompts.jsonl"),
    ({"model_dir": "ghost_1"}, "model_dir 'ghost_1' not in models.jsonl"),
    ({"question_id": "q000", "model_dir": "Model-0_abc0"}, "duplicate of line 1"),
])
def test_invalid_response_rows_name_file_and_line(make_wpb: MakeWpb, edit: dict[str, object],
                                                  needle: str) -> None:
    folder = make_wpb(n_prompts=3, n_models=2)
    _rewrite(folder, "responses_scores.jsonl", edit)
    with pytest.raises(WpbDataError) as err:
        load_wpb(folder)
    assert f"{folder / 'responses_scores.jsonl'}:2:" in str(err.value)
    assert needle in str(err.value)


def test_missing_directory_and_files(make_wpb: MakeWpb, tmp_path: Path) -> None:
    with pytest.raises(WpbDataError, match="data directory not found"):
        load_wpb(tmp_path / "absent")
    folder = make_wpb(n_prompts=2, n_models=2)
    (folder / "models.jsonl").unlink()
    with pytest.raises(WpbDataError, match=r"models\.jsonl: missing"):
        load_wpb(folder)


@pytest.mark.slow
def test_real_data_loads(real_wpb: Path) -> None:
    data = load_wpb(real_wpb)
    rows = data.responses
    assert rows.height == 4079
    assert rows["model"].n_unique() == 20 and rows["question_id"].n_unique() == 204
    assert data.prompts.height == 204
    assert dict(rows["score"].value_counts().iter_rows()) == {0: 166, 1: 1291, 2: 1653, 3: 969}
    assert rows["predict0"].null_count() == 204 == rows["cjk_chars"].null_count()
    assert rows.filter(pl.col("predict0").is_null())["model"].unique().to_list() == [
        "Gemini-2.5-flash.preview.0520"]
    assert rows.filter(pl.col("model") == "Gemini-2.5-pro.preview.0506").height == 203
    assert rows["score_alt"].drop_nulls().len() == 1020
    assert int(data.models["has_alt"].sum()) == 5
