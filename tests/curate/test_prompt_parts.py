from __future__ import annotations

import pytest

from essaybench.curate.prompt_parts import BARE_TOPIC_MAX, PromptParts, split_prompt

EXAM = ("阅读下面的寓言，根据要求写作。\n"
        "一只乌鸦想喝瓶子里的水，它把石子一颗一颗衔进瓶中，终于喝到了水。\n"
        "读了这则寓言，你有什么感悟？请写一篇文章。\n"
        "要求：选准角度，明确文体，自拟标题；不少于800字。")


def segments(parts: PromptParts) -> dict[str, str]:
    return {s: parts.text_of(s) for s in ("material", "task", "requirements")}


def test_parts_cover_the_text_in_order_without_overlap() -> None:
    parts = split_prompt(EXAM)
    pos = 0
    for part in parts.parts:
        assert part.start == pos and part.end > part.start
        pos = part.end
    assert pos == len(EXAM)


def test_exam_prompt_material_task_requirements() -> None:
    seg = segments(split_prompt(EXAM))
    assert "乌鸦想喝瓶子里的水" in seg["material"]
    assert "请写一篇文章" in seg["task"] and "你有什么感悟" in seg["task"]
    assert seg["requirements"].strip() == "要求：选准角度，明确文体，自拟标题；不少于800字。"
    # "阅读下面的寓言" and "读了这则寓言" name the material: 寓言 there is not the task's
    assert "寓言" not in seg["task"] and "阅读下面的寓言" in seg["material"]


def test_long_quotation_in_a_task_sentence_is_material_but_the_title_is_task() -> None:
    text = "有人说“成长就是学会与自己的不完美和解”，请以“和解”为题写一篇文章。"
    parts = split_prompt(text)
    quote_at = text.index("“成长")
    assert parts.segment_at(quote_at) == "material"
    assert parts.segment_at(text.index("和解”为题")) == "task"


def test_chat_request_is_task_and_what_follows_it_requirements() -> None:
    text = "能帮我写一篇关于环保的演讲稿吗？在国旗下讲话用，面向全校师生"
    seg = segments(split_prompt(text))
    assert seg["task"] == "能帮我写一篇关于环保的演讲稿吗？"
    assert seg["requirements"] == "在国旗下讲话用，面向全校师生"
    assert seg["material"] == ""


def test_task_ending_in_a_colon_introduces_material() -> None:
    text = "请为下面这段文字写摘要：\n城市绿地越来越多，居民的休闲方式也随之改变。"
    parts = split_prompt(text)
    assert parts.segment_at(text.index("城市绿地")) == "material"


@pytest.mark.parametrize(("text", "segment"), [
    ("我的同桌", "task"),  # a bare topic is the task
    ("山村往事。" + "文清刚来清溪湾的时候，正值深秋，满山遍野的红叶像火焰在燃烧。" * 5,
     "material"),  # pasted text without any request is no task
])
def test_prompt_without_a_task_sentence(text: str, segment: str) -> None:
    assert (len(text) <= BARE_TOPIC_MAX) == (segment == "task")
    assert {p.segment for p in split_prompt(text).parts} == {segment}


def test_traditional_characters_are_read_as_simplified_offsets_kept() -> None:
    text = "他講述了自己的故事。\n請以「讀書」為題，寫一篇議論文，800字以上"
    parts = split_prompt(text)
    assert parts.text == text
    assert parts.segment_at(0) == "material"
    assert parts.segment_at(text.index("寫一篇")) == "task"


def test_keep_blanks_other_segments_and_keeps_offsets() -> None:
    parts = split_prompt(EXAM)
    kept = parts.keep({"task"})
    assert len(kept) == len(EXAM)
    assert "乌鸦" not in kept and kept.index("请写一篇文章") == EXAM.index("请写一篇文章")
