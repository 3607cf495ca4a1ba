"""Issue 29 item 5: kinds of non-essay request the held-out public prompts showed the rules
reading as essays (or leaving to a labeller). Examples written for the test, one per kind,
each next to an essay prompt that must stay one."""

from __future__ import annotations

import pytest

from essaybench.curate.genre_rules import ANY_GENRE, genre_by_rules
from essaybench.curate.labeler import Genre

STORY = "老王在村口守了四十年的渡口，每天摆渡的人越来越少。他说：“船不能停。”"


@pytest.mark.parametrize(("text", "kind", "cue"), [
    (f"阅读下面的文字，完成下列各题。\n{STORY}\n（1）请简要分析老王的形象。\n"
     "（2）小说以“渡口”为题有什么用意？请结合全文，谈谈你的看法。",
     "an exam item about a given text", "完成下列各题"),
    (f"阅读下面的文字，完成（1）～（3）题。\n{STORY}\n（3）有人说这是一篇科普文章，你同意吗？",
     "an exam item about a given text", "完成（1）～（3"),
    ("阅读下面这首宋诗，完成下面小题。\n春风吹雨绕残枝，落花无可飞。\n"
     "末尾两句表现了诗人怎样的情绪？请简要阐述。", "an exam item about a given text",
     "完成下面小题"),
    ("作为一名经济学家，简述数字经济如何促进就业。请运用专业术语增强论点的说服力，"
     "300字左右。", "a short answer", "简述"),
    ("胃胀怎么办\n以个人经历分享为中心，生成一篇小红书风格的文章，300到400字。",
     "a post for a platform or a marketing piece", "小红书风格的文章"),
    ("以“这些好物别错过”为标题写一篇爆文级别的消费类文章，要有情感共鸣。",
     "a post for a platform or a marketing piece", "爆文级别的消费类文章"),
    ("按照下列大纲，写篇文章，2000字左右。标题：某茶企走进武夷山\n导语：近日，某茶企宣布启动"
     "寻茶之旅。第二段，介绍武夷山茶叶的品质。", "a news piece (given its lead)", "导语："),
    ("创作三篇关于春游的日记，每天一篇，每篇300字左右。",
     "several pieces, a series rather than one essay", "创作三篇"),
    ("帮我用英语写一篇介绍长城的文章，不少于800字。", "a text in another language",
     "用英语写"),
    ("你是一名记者，正在专访一位航天员，请准备相关问题。",
     "a list of questions", "准备相关问题"),
    ("新型储能电池热管理技术的国内外研究现状详细解说，800字左右。",
     "a part of academic work", "研究现状"),
])
def test_such_a_request_is_no_essay_whatever_genre_words_it_holds(
        text: str, kind: str, cue: str) -> None:
    rule = genre_by_rules(text)
    assert rule.not_essay and not rule.decided, rule.evidence
    assert f"the task asks for {kind} ({cue}" in rule.evidence
    assert rule.span is not None and text[rule.span[0]:rule.span[1]].startswith(cue)


@pytest.mark.parametrize(("text", "allowed"), [
    # an exam essay prompt says 根据要求写作, never 完成…题
    ("阅读下面的材料，根据要求写作。\n" + STORY + "\n以上材料引发了你怎样的联想和思考？"
     "请写一篇文章。\n要求：选准角度，确定立意，明确文体，自拟标题；不少于800字。",
     (ANY_GENRE,)),
    ("请完成下面的作文题：以“路”为题，写一篇记叙文，不少于600字。", ("narrative",)),
    # a short answer that asks for an essay is an essay prompt
    ("请简述你对“躺平”的看法，写一篇不少于800字的议论文。", ("argumentative",)),
    # one diary is a narrative, not a series
    ("写一篇日记，记一次难忘的春游，不少于500字。", ("narrative",)),
    # research as the topic of an essay
    ("谈谈你对我国航天研究现状的看法，写一篇议论文。", ("argumentative",)),
    # 公众号 as the topic of an opinion, not the place to publish
    ("谈谈你对“公众号文化”的看法，写一篇文章，不少于800字。", ("argumentative",)),
])
def test_an_essay_prompt_is_not_taken_for_one_of_them(
        text: str, allowed: tuple[str, ...]) -> None:
    rule = genre_by_rules(text)
    assert not rule.not_essay and rule.allowed == allowed, rule.evidence


def test_a_product_named_without_a_writing_verb_is_no_essay() -> None:
    rule = genre_by_rules("鲁迅简介，200字左右")
    assert rule.not_essay and "简介, named without a writing verb" in rule.evidence


def test_a_non_essay_word_inside_the_first_clause_is_not_a_product() -> None:
    """新闻 in 新闻评论员 is not what is asked for; the commentary is (时评: argumentative)."""
    rule = genre_by_rules("你是一名专业的新闻评论员，请就以下主题发表观点：城市夜经济的利与弊。"
                          "字数不少于1500字。")
    assert not rule.not_essay and rule.genre == Genre.ARGUMENTATIVE
