"""classify with task/material segmentation: open genres, choices, evidence spans."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from essaybench.core.hashing import prompt_id
from essaybench.core.paths import PROJECT_ROOT
from essaybench.curate.classify import ClassifyParams, run_classify
from essaybench.curate.config import load_curate_config
from essaybench.curate.labeler import FakeLabeler, Genre, LabelResult, LabelStatus
from essaybench.curate.promptset import freeze_prompt_set
from essaybench.curate.table import CLASSIFY_COLUMNS
from tests.curate.test_classify import table

OPEN = ("阅读下面的材料，根据要求写作。\n一位老木匠讲述了自己的成长经历。\n"
        "请写一篇文章。要求：文体不限，不少于800字。")
CHOICE = "写一篇议论文或记叙文，题目是《坚持》，不少于800字。"
SINGLE = "阅读下面的材料。\n他讲述了自己的成长故事。\n请谈谈你的看法，不少于600字。"
MATERIAL_ONLY = ("阅读下面的材料，根据要求写作。\n一位老木匠讲述了自己四十年来的成长经历。\n"
                 "请写一篇文章，不少于800字。")


def test_rows_carry_allowed_genres_span_and_segment() -> None:
    params = ClassifyParams(keep_genre_choice=False)  # open and choice prompts wait in review
    t = run_classify(table([OPEN, CHOICE, SINGLE, MATERIAL_ONLY]), params).table
    assert t.schema["allowed_genres"] == pl.List(pl.Utf8)
    assert t.schema["genre_open"] == pl.Boolean
    assert t["allowed_genres"].to_list() == [["any"], ["argumentative", "narrative"],
                                             ["argumentative"], []]
    assert t["genre_open"].to_list() == [True, False, False, False]
    assert t["genre"].to_list() == [None, None, "argumentative", None]
    assert t["genre_segment"].to_list() == ["requirements", "task", "task", None]
    assert t["genre_span"].to_list() == ["文体不限", "议论文", "谈谈", None]
    assert t["reason"].to_list() == ["genre_open", "genre_multi", None, "genre_undecided"]
    assert "keep_genre_choice" in t["detail"][0] and "override" in t["detail"][0]
    assert "never decides alone" in t["detail"][3]


def test_keep_genre_choice_publishes_open_and_choice_prompts() -> None:
    # on by default, as in the shipped configs/curate.yaml
    shipped = load_curate_config(PROJECT_ROOT / "configs" / "curate.yaml").classify
    assert ClassifyParams().keep_genre_choice and shipped.keep_genre_choice
    out = run_classify(table([OPEN, CHOICE, SINGLE]), ClassifyParams())
    t = out.table
    assert t["decision"].to_list() == ["kept", "kept", "kept"]
    assert t["reason"].to_list() == [None, None, None]
    assert t["genre"].to_list() == [None, None, "argumentative"]
    assert out.meta["genre_choice"] == {"open": 1, "multi": 1, "kept": True}
    ps = freeze_prompt_set(t)
    assert ps.n_prompts == 3
    assert ps.counts["choice"]["constrained"] == 2
    by_id = {r["prompt_id"]: r for r in ps.prompts.iter_rows(named=True)}
    assert by_id[prompt_id(CHOICE)]["allowed_genres"] == ["argumentative", "narrative"]
    # a choice's allowed genres are part of the version; a single genre's are not
    relabelled = t.with_columns(
        pl.when(pl.col("prompt_id") == prompt_id(CHOICE))
        .then(pl.lit(["argumentative", "expository"]))
        .otherwise(pl.col("allowed_genres")).alias("allowed_genres"))
    assert freeze_prompt_set(relabelled).version != ps.version
    single_only = t.filter(pl.col("prompt_id") == prompt_id(SINGLE))
    assert freeze_prompt_set(single_only).version == freeze_prompt_set(
        single_only.with_columns(pl.lit(None, dtype=CLASSIFY_COLUMNS["allowed_genres"])
                                 .alias("allowed_genres"))).version


def test_labeler_is_not_asked_for_a_genre_the_rules_found_open_or_not_an_essay() -> None:
    letter = "帮我写一封感谢信，感谢社区志愿者在疫情期间的帮助，讲述他们的故事"
    fake = FakeLabeler(lambda r: LabelResult(status=LabelStatus.OK, genre=Genre.NARRATIVE,
                                             evidence="感谢"))
    t = run_classify(table([OPEN, CHOICE, letter]), ClassifyParams(mode="rules+llm"),
                     fake).table
    assert all(not call.need_genre for call in fake.calls)
    assert t["genre"].to_list() == [None, None, None]
    assert t["allowed_genres"].to_list() == [["any"], ["argumentative", "narrative"], []]
    assert t["decision"].to_list() == ["kept", "kept", "unclassified"]
    assert t["reason"].to_list() == [None, None, "genre_not_essay"]
    off = run_classify(table([OPEN, CHOICE, letter]),
                       ClassifyParams(mode="rules+llm", keep_genre_choice=False), fake).table
    assert off["reason"].to_list() == ["genre_open", "genre_multi", "genre_not_essay"]
    assert all(not call.need_genre for call in fake.calls)
    assert (t["genre_segment"][2], t["genre_span"][2]) == ("task", "感谢信")
    assert "something other than an essay" in t["detail"][2]


def test_labeler_genre_with_evidence_only_in_the_material_is_rejected() -> None:
    fake = FakeLabeler({prompt_id(MATERIAL_ONLY): LabelResult(
        status=LabelStatus.OK, genre=Genre.NARRATIVE, evidence="讲述了自己四十年来的成长经历")})
    out = run_classify(table([MATERIAL_ONLY]), ClassifyParams(mode="rules+llm"), fake)
    row = out.table.row(0, named=True)
    assert row["genre"] is None and row["decision"] == "unclassified"
    assert "only in the material, not in the task or requirements" in row["detail"]
    assert out.meta["llm"]["incomplete"] == 1


def test_labeler_genre_with_evidence_in_the_task_is_kept_with_its_segment() -> None:
    fake = FakeLabeler({prompt_id(MATERIAL_ONLY): LabelResult(
        status=LabelStatus.OK, genre=Genre.ARGUMENTATIVE, evidence="“请写一篇文章”")})
    row = run_classify(table([MATERIAL_ONLY]), ClassifyParams(mode="rules+llm"),
                       fake).table.row(0, named=True)
    assert (row["genre"], row["genre_source"], row["genre_segment"]) == (
        "argumentative", "llm", "task")
    assert row["allowed_genres"] == ["argumentative"]


def test_override_of_an_open_prompt_gives_it_one_genre(tmp_path: Path) -> None:
    path = tmp_path / "overrides.yaml"
    path.write_text(f"version: 1\noverrides:\n  {prompt_id(OPEN)}:\n    genre: narrative\n",
                    encoding="utf-8")
    row = run_classify(table([OPEN]), ClassifyParams(overrides_path=str(path))).table.row(
        0, named=True)
    assert (row["decision"], row["genre"], row["genre_source"]) == ("kept", "narrative",
                                                                   "manual")
    assert row["allowed_genres"] == ["narrative"] and row["genre_open"] is False
