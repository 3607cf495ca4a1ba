"""What needs review in a classify snapshot, decisions as typed, and the to-fill review file."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import polars as pl
import pytest
import yaml

from essaybench.curate.labeler import Genre, PromptSetLabel
from essaybench.curate.overrides import OverrideEntry
from essaybench.curate.review import (
    ReviewInputError,
    ReviewLabels,
    entry,
    parse_decision,
    parse_labels,
    read_review_file,
    review_file_text,
    review_items,
    still_needs,
    unknown_ids,
)

NO_GENRE, NO_SET, BY_LLM, BY_RULE = ("p" + c * 15 for c in "abcd")


def classified() -> pl.DataFrame:
    """Four classify rows: genre undecided, set undecided, kept by the LLM, kept by rules."""
    return pl.DataFrame({
        "prompt_id": [NO_GENRE, NO_SET, BY_LLM, BY_RULE],
        "text": ["请以“门”为题写一篇文章。", "写一篇记叙文，讲讲你的外婆。", "谈谈你对规则的理解。",
                 "写一篇议论文。"],
        "decision": ["unclassified", "unclassified", "kept", "kept"],
        "reason": ["genre_undecided", "set_undecided", None, None],
        "genre": [None, "narrative", "argumentative", "argumentative"],
        "genre_source": [None, "rule", "llm", "rule"],
        "genre_evidence": ["rule: undecided, no genre word or cue", "rule:记叙文",
                           "llm: 谈谈你对规则的理解", "rule:议论文"],
        "prompt_set": ["open", None, "open", "open"],
        "set_source": ["rule", None, "rule", "rule"],
        "set_evidence": ["rule: no constraint found", "rule: undecided, long prompt",
                         "rule: no constraint found", "rule: no constraint found"],
        "source": ["chat", "chat", "exam", "exam"],
        "locator": ["line 1", "line 2", "row 1 (line 2)", "row 2 (line 3)"],
    })


@pytest.mark.parametrize("typed,genre,pset", [
    ("narrative", Genre.NARRATIVE, None),
    ("Narrative, OPEN", Genre.NARRATIVE, PromptSetLabel.OPEN),
    ("记叙文，限制式", Genre.NARRATIVE, PromptSetLabel.CONSTRAINED),
    ("e,c", Genre.EXPOSITORY, PromptSetLabel.CONSTRAINED),
    ("constrained", None, PromptSetLabel.CONSTRAINED),
    ("o d", Genre.DESCRIPTIVE, PromptSetLabel.OPEN),
])
def test_labels_in_english_chinese_or_by_first_letter(
    typed: str, genre: Genre | None, pset: PromptSetLabel | None,
) -> None:
    assert parse_labels(typed) == ReviewLabels(genre, pset)


@pytest.mark.parametrize("typed,problem", [
    ("poem", "'poem' is neither a genre nor a set"),
    ("narrative,n", "'n' gives a genre twice"),
    ("open,c", "'c' gives a set twice"),
    (" , ", "no label given"),
    ("any,narrative", "give no genre with it"),
    ("not_essay,open", "'not_essay' stands alone"),
])
def test_bad_labels_say_which_word(typed: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_labels(typed)


@pytest.mark.parametrize("typed,labels", [
    ("any", ReviewLabels(None, None, ("any",))),
    ("文体不限,open", ReviewLabels(None, PromptSetLabel.OPEN, ("any",))),
    ("narrative,argumentative,c",
     ReviewLabels(None, PromptSetLabel.CONSTRAINED, ("argumentative", "narrative"))),
    ("not_essay:请假条，不是作文", ReviewLabels(None, None, not_essay=True,
                                       reason="请假条，不是作文")),
    ("exclude", ReviewLabels(None, None, not_essay=True)),
    ("非作文：新闻稿", ReviewLabels(None, None, not_essay=True, reason="新闻稿")),
])
def test_a_reviewer_decides_any_genre_a_choice_or_not_an_essay(
    typed: str, labels: ReviewLabels,
) -> None:
    assert parse_labels(typed) == labels


def test_not_an_essay_needs_the_reviewers_reason() -> None:
    with pytest.raises(ValueError, match="not_essay needs the reviewer's reason"):
        entry(parse_labels("none"))
    assert entry(parse_labels("none"), note="笑话") == OverrideEntry(not_essay=True, note="笑话")
    inline = entry(parse_labels("not_essay:祭文"), note="ignored", reviewer="li")
    assert (inline.not_essay, inline.note, inline.reviewer) == (True, "祭文", "li")


def test_a_decision_is_prompt_id_equals_labels() -> None:
    assert parse_decision(f"{NO_GENRE}=a") == (NO_GENRE, ReviewLabels(Genre.ARGUMENTATIVE, None))
    with pytest.raises(ValueError, match="expected PROMPT_ID=LABELS"):
        parse_decision(NO_GENRE)
    with pytest.raises(ValueError, match=f"'{NO_GENRE}=x'.*'x' is neither"):
        parse_decision(f"{NO_GENRE}=x")


def test_unclassified_rows_are_listed_with_what_they_need_and_why() -> None:
    items = review_items(classified(), {})
    assert [(i.prompt_id, i.needs, i.why) for i in items] == [
        (NO_GENRE, ("genre",), "genre_undecided"), (NO_SET, ("prompt_set",), "set_undecided")]
    first = items[0]
    assert first.genre_evidence == "rule: undecided, no genre word or cue"
    assert first.where == "chat line 1" and first.prompt_set == "open" and first.decided is None


def test_llm_labels_are_listed_on_request() -> None:
    items = review_items(classified(), {}, include_llm=True)
    assert [i.prompt_id for i in items] == [NO_GENRE, NO_SET, BY_LLM]
    assert items[2].needs == () and items[2].why == "labelled by the LLM"


def test_decided_prompts_are_left_out_unless_asked_for() -> None:
    decided = {NO_GENRE: OverrideEntry(genre=Genre.NARRATIVE),
               NO_SET: OverrideEntry(genre=Genre.NARRATIVE)}  # the set is still missing
    items = review_items(classified(), decided)
    assert [i.prompt_id for i in items] == [NO_SET]
    assert still_needs(items[0], decided[NO_SET]) == ["prompt_set"]
    every = review_items(classified(), decided, include_decided=True)
    assert [(i.prompt_id, i.decided) for i in every] == [
        (NO_GENRE, decided[NO_GENRE]), (NO_SET, decided[NO_SET])]


def test_a_table_that_is_not_a_classify_snapshot_is_refused() -> None:
    with pytest.raises(ValueError, match=r"lacks the columns \['genre', 'prompt_set'\]"):
        review_items(classified().drop("genre", "prompt_set"), {})


def test_unknown_ids() -> None:
    assert unknown_ids([NO_GENRE, "p" + "f" * 15, "nope"], classified()) == ["nope",
                                                                           "p" + "f" * 15]


def _filled(tmp_path: Path, fill: Mapping[str, Mapping[str, object]]) -> Path:
    path = tmp_path / "review.yaml"
    text = review_file_text(review_items(classified(), {}, include_llm=True), "classify-x", path)
    doc = yaml.safe_load(text)
    for item in doc["items"]:
        item.update(fill.get(item["prompt_id"], {}))
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    return path


def test_review_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "review.yaml"
    text = review_file_text(review_items(classified(), {}), "classify-x", path)
    assert f"essaybench curate review --apply {path}" in text  # says what to do with it
    doc = yaml.safe_load(text)
    assert doc["snapshot_id"] == "classify-x"
    assert [(i["prompt_id"], i["needs"], i["genre"]) for i in doc["items"]] == [
        (NO_GENRE, ["genre"], None), (NO_SET, ["prompt_set"], None)]
    assert doc["items"][0]["text"] == "请以“门”为题写一篇文章。"
    filled = _filled(tmp_path, {NO_GENRE: {"genre": "记叙文", "note": "题目只给了一个字",
                                           "reviewer": "li"},
                                BY_LLM: {"genre": "argumentative", "prompt_set": "open"}})
    assert read_review_file(filled) == {
        NO_GENRE: OverrideEntry(genre=Genre.NARRATIVE, note="题目只给了一个字", reviewer="li"),
        BY_LLM: OverrideEntry(genre=Genre.ARGUMENTATIVE, prompt_set=PromptSetLabel.OPEN),
    }  # NO_SET was left blank: skipped


def test_a_multi_line_prompt_is_written_as_a_block(tmp_path: Path) -> None:
    material = "阅读下面的材料。\n材料……\n要求：自拟题目。"
    table = classified().with_columns(pl.Series("text", [material, "b", "c", "d"]))
    text = review_file_text(review_items(table, {}), "classify-x", tmp_path / "r.yaml")
    assert "  text: |-\n    阅读下面的材料。\n    材料……\n    要求：自拟题目。\n" in text


@pytest.mark.parametrize("fill,problem", [
    ({"genre": "poem"}, "'poem' is neither a genre nor a set"),
    ({"genre": "open"}, "genre 'open' is not a genre"),
    ({"prompt_set": "narrative"}, "prompt_set 'narrative' is not open or constrained"),
    ({"mood": "x"}, "Extra inputs are not permitted"),
])
def test_a_wrong_filled_item_names_the_file_line_and_item(
    tmp_path: Path, fill: dict[str, str], problem: str,
) -> None:
    path = _filled(tmp_path, {NO_SET: fill})
    with pytest.raises(ReviewInputError, match=problem) as caught:
        read_review_file(path)
    assert str(path) in str(caught.value) and ":" in str(caught.value)
    if "mood" not in fill:
        assert NO_SET in str(caught.value)


def test_an_item_given_twice_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "review.yaml"
    path.write_text(f"items:\n- {{prompt_id: {NO_GENRE}, genre: n}}\n"
                    f"- {{prompt_id: {NO_GENRE}, genre: a}}\n", encoding="utf-8")
    with pytest.raises(ReviewInputError, match=rf"review.yaml:3: .*{NO_GENRE}' appears twice"):
        read_review_file(path)


def test_a_prompt_that_leaves_the_genre_open_shows_what_it_allows(tmp_path: Path) -> None:
    table = classified().with_columns(
        pl.Series("reason", ["genre_open", "set_undecided", None, None]),
        pl.Series("allowed_genres", [["any"], ["narrative"], ["argumentative"],
                                     ["argumentative"]], dtype=pl.List(pl.Utf8)),
        pl.Series("genre_segment", ["requirements", "task", None, "task"]),
        pl.Series("genre_span", ["文体不限", "记叙文", None, "议论文"]))
    first = review_items(table, {})[0]
    assert (first.why, first.allowed_genres, first.genre_segment, first.genre_span) == (
        "genre_open", ("any",), "requirements", "文体不限")
    doc = yaml.safe_load(review_file_text([first], "classify-x", tmp_path / "r.yaml"))
    # what the rules found is context; allowed_genres is left for the reviewer's decision
    assert "(the prompt allows any)" in doc["items"][0]["current"]
    assert doc["items"][0]["allowed_genres"] == []


def test_a_review_file_records_any_a_choice_and_not_an_essay(tmp_path: Path) -> None:
    filled = _filled(tmp_path, {
        NO_GENRE: {"allowed_genres": ["any"]},
        NO_SET: {"genre": ["narrative", "议论文"], "prompt_set": "open"},
        BY_LLM: {"genre": "not_essay", "note": "请假条", "reviewer": "li"}})
    assert read_review_file(filled) == {
        NO_GENRE: OverrideEntry(allowed_genres=("any",)),
        NO_SET: OverrideEntry(allowed_genres=("argumentative", "narrative"),
                              prompt_set=PromptSetLabel.OPEN),
        BY_LLM: OverrideEntry(not_essay=True, note="请假条", reviewer="li")}
    flagged = _filled(tmp_path, {NO_GENRE: {"not_essay": True, "note": "新闻"}})
    assert read_review_file(flagged)[NO_GENRE] == OverrideEntry(not_essay=True, note="新闻")


@pytest.mark.parametrize("fill,problem", [
    ({"not_essay": True}, "not_essay needs the reviewer's reason"),
    ({"not_essay": True, "note": "x", "prompt_set": "open"}, "'not_essay' stands alone"),
    ({"genre": "n", "allowed_genres": ["any"]}, "genre or allowed_genres, not both"),
    ({"allowed_genres": ["any", "narrative"]}, "give no genre with it"),
])
def test_a_contradictory_decision_in_a_review_file_is_refused(
    tmp_path: Path, fill: dict[str, object], problem: str,
) -> None:
    with pytest.raises(ReviewInputError, match=problem):
        read_review_file(_filled(tmp_path, {NO_GENRE: fill}))


def test_a_prompt_decided_not_an_essay_or_any_needs_nothing_more() -> None:
    items = review_items(classified(), {})
    removed = OverrideEntry(not_essay=True, note="笑话")
    assert still_needs(items[1], removed) == []
    assert still_needs(items[0], OverrideEntry(allowed_genres=("any",))) == []
    decided = {NO_GENRE: OverrideEntry(allowed_genres=("any",)), NO_SET: removed}
    assert review_items(classified(), decided) == []


def test_the_listing_item_carries_the_labellers_answer() -> None:
    table = classified().with_columns(pl.Series(
        "llm_answer", ["llm parse_error: evidence '流' shows nothing", None, None, None]))
    assert review_items(table, {})[0].labeller == "llm parse_error: evidence '流' shows nothing"


def test_an_older_snapshot_shows_the_labellers_note_from_its_detail() -> None:
    detail = ("genre undecided (rule: undecided, no genre word or cue; llm parse_error: "
              "evidence '流' shows nothing); to resolve, add to overrides.yaml under ...")
    table = classified().with_columns(pl.Series("detail", [detail, None, None, None]))
    assert review_items(table, {})[0].labeller == "llm parse_error: evidence '流' shows nothing"
