"""Issue 15, item 3: lengths and counts are requirements of a target, not of the prompt."""

from __future__ import annotations

import pytest

from essaybench.constraints import (
    Constraint,
    binding,
    extract_constraints,
    length_requirement,
    length_requirements,
)
from essaybench.constraints.requirement import LengthRequirement, combine_lengths


def lengths(text: str) -> list[tuple[str, str | None, int | None, int | None, int | None]]:
    return [(c.evidence, c.target, c.min_chars, c.max_chars, c.approx_chars)
            for c in extract_constraints(text) if c.kind == "length"]


def counts(text: str) -> list[tuple[str, str | None, str | None, int | None, int | None]]:
    return [(c.evidence, c.unit, c.target, c.min_count, c.max_count)
            for c in extract_constraints(text) if c.kind == "count"]


# --- the cases ------------------------------------------------------------------

def test_title_and_body_lengths_are_separate() -> None:
    text = "题目不超过10个字，正文不少于800字"
    assert lengths(text) == [("不超过10个字", "title", None, 10, None),
                             ("不少于800字", "body", 800, None, None)]
    reqs = length_requirements(text)
    assert reqs["body"].bounds() == (800, None)
    assert reqs["title"].bounds() == (None, 10)


def test_summary_length_is_not_the_body_length() -> None:
    text = "不少于800字，并附50字以内的摘要"
    assert lengths(text) == [("不少于800字", "body", 800, None, None),
                             ("50字以内", "summary", None, 50, None)]
    assert length_requirements(text)["summary"].bounds() == (None, 50)
    body = length_requirement(text)
    assert body is not None and body.bounds() == (800, None)


@pytest.mark.parametrize("text", [
    "写一篇200-300字左右的短文，再为它配一句10到20个字的宣传语",  # named: 宣传语
    "写一篇200-300字左右的短文，另外写10到20个字",  # unnamed: contradicts the body
])
def test_a_second_length_for_something_else_leaves_the_body_alone(text: str) -> None:
    assert [t for _, t, *_ in lengths(text)] == ["body", "other"]
    body = length_requirement(text)
    assert body is not None and (body.min_chars, body.max_chars) == (200, 300)
    assert body.evidence == ("200-300字左右",)


# --- targets named before or after the number --------------------------------------------

@pytest.mark.parametrize(("text", "target"), [
    ("标题10字以内", "title"), ("题目字数不超过12", "title"), ("拟一个十字以内的标题", "title"),
    ("正文字数不少于800", "body"), ("写一篇800字的作文", "body"), ("全文不少于600字", "body"),
    ("写一封300字左右的信", "body"), ("写两篇作文，每篇不少于600字", "body"),
    ("用五十字以内概括", "summary"), ("摘要要求控制在100字以内", "summary"),
    ("写一则20字以内的广告语", "other"), ("每条10个字", "other"), ("每一条在15字以内", "other"),
    ("开头不超过100字", "other"), ("写一首20字以内的小诗", "other"),
    ("副标题不超过15字", "other"),
])
def test_named_targets(text: str, target: str) -> None:
    [(_, found, *_)] = lengths(text)
    assert found == target


@pytest.mark.parametrize("text", [
    "不少于800字", "作文题目：我的妈妈 800字", "以成长为题目写800字", "自拟题目，不少于800字",
    "写一篇800字的信息技术作文", "写一篇800字的诗歌鉴赏",
])
def test_unnamed_lengths_are_the_body(text: str) -> None:
    assert [t for _, t, *_ in lengths(text)] == ["body"]


def test_bounds_that_agree_all_bind_the_body() -> None:
    body = length_requirement("不少于600字，不超过800字，约700字")
    assert body is not None and body.bounds() == (630, 770)
    assert body.ignored == ()


def test_a_later_contradiction_of_a_named_body_is_ignored_not_combined() -> None:
    req = combine_lengths([
        Constraint("length", "不少于800字", (0, 7), min_chars=800, target="body"),
        Constraint("length", "约500字", (8, 12), approx_chars=500, target="body"),
        Constraint("length", "不超过1000字", (13, 21), max_chars=1000, target="body"),
    ])
    assert req == LengthRequirement(800, 1000, None, ("不少于800字", "不超过1000字"), "body",
                                    ("约500字",))


def test_a_named_body_length_wins_over_an_earlier_unnamed_one() -> None:
    text = "先写一句10到20个字的话，正文不少于800字"
    assert [(e, t) for e, t, *_ in lengths(text)] == [("10到20个字", "other"),
                                                       ("不少于800字", "body")]


# --- counts of pieces ---------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("帮我写10条10个字的评语", [("写10条10个字的评语", "条", "评语", 10, 10)]),
    ("写十条评语，每条10个字", [("写十条评语", "条", "评语", 10, 10)]),
    ("写两首关于春天的诗", [("写两首关于春天的诗", "首", "诗", 2, 2)]),
    ("写两篇作文，一篇记叙文", [("写两篇作文", "篇", "作文", 2, 2)]),
    ("提出三点建议", [("提出三点建议", "点", "建议", 3, 3)]),
    ("至少写五条标语", [("至少写五条标语", "条", "标语", 5, None)]),
    ("列出不超过三条理由", [("不超过三条理由", "条", "理由", None, 3)]),
    ("写3到5句", [("写3到5句", "句", None, 3, 5)]),
    ("写五到三条口号", [("写五到三条口号", "条", "口号", 3, 5)]),
])
def test_piece_counts(text: str, expected: list[tuple[object, ...]]) -> None:
    assert counts(text) == expected


@pytest.mark.parametrize("text", [
    "写一篇议论文", "写一首诗", "人生有两条路", "下午三点钟写作文", "写第三点", "写两点半的故事",
    "不少于三条论据",
])
def test_not_a_piece_count(text: str) -> None:
    assert counts(text) == []


def test_a_piece_count_makes_the_prompt_constrained() -> None:
    assert [c.kind for c in binding(extract_constraints("写两篇作文"))] == ["count"]


def test_traditional_characters_are_read_and_quoted_as_written() -> None:
    text = "題目不超過10個字，正文不少於八百字"
    assert lengths(text) == [("不超過10個字", "title", None, 10, None),
                             ("不少於八百字", "body", 800, None, None)]
    [c] = counts("寫十條評語")
    assert c == ("寫十條評語", "条", "評語", 10, 10)
    [title] = extract_constraints("以“題”為題寫一篇記敘文")
    assert (title.evidence, title.value) == ("以“題”為題", "題")
