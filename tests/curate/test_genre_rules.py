"""Issue 15, item 1: genre read from the task and requirements, not from the material."""

from __future__ import annotations

import pytest

from essaybench.curate.genre_rules import ANY_GENRE, genre_by_rules
from essaybench.curate.labeler import Genre

INTRO = "阅读下面的材料，根据要求写作。\n"


@pytest.mark.parametrize(("material", "cue"), [
    ("一位老木匠回忆了自己四十年来的成长，他说每一块木板都要刨平。", "成长"),
    ("课后服务中发生了许多新鲜事：有的学校开设了非遗课堂。", "发生"),
    ("伊索讲过一个寓言：狐狸吃不到葡萄，就说葡萄是酸的。", "寓言"),
    ("升旗的场面庄严肃穆，晨光洒在每一张稚嫩的脸上。", "场面"),
])
def test_a_cue_inside_the_material_never_decides_alone(material: str, cue: str) -> None:
    rule = genre_by_rules(f"{INTRO}{material}\n请写一篇文章，不少于800字。")
    assert rule.genre is None and not rule.decided
    assert "no genre word or cue" in rule.evidence
    assert "material (weak, never decides alone)" in rule.evidence and cue in rule.evidence


@pytest.mark.parametrize(("material", "cue"), [
    ("一位老木匠回忆了自己四十年来的成长经历，讲述了许多故事。", "成长"),
    ("课后服务中发生了许多新鲜事，有人描绘了热闹的场面。", "发生"),
])
def test_the_task_decides_over_cues_in_the_material(material: str, cue: str) -> None:
    text = f"{INTRO}{material}\n对此，你有怎样的看法？请写一篇文章。"
    rule = genre_by_rules(text)
    assert rule.genre == Genre.ARGUMENTATIVE and rule.allowed == ("argumentative",)
    assert rule.segment == "task" and rule.span is not None
    assert text[rule.span[0]:rule.span[1]] == "看法"
    assert rule.evidence.startswith("rule cues: argumentative=1 [看法]")


def test_a_genre_word_in_the_material_is_ignored() -> None:
    text = f"{INTRO}老师说：“记叙文要写出真情实感。”\n请以“真”为题写一篇议论文。"
    rule = genre_by_rules(text)
    assert rule.genre == Genre.ARGUMENTATIVE and rule.segment == "task"
    assert "ignored in the material 记叙文" in rule.evidence


@pytest.mark.parametrize("words", ["文体不限", "除诗歌外，文体不限", "明确文体", "自选文体",
                                   "文体自选", "体裁不限", "自定文体"])
def test_open_genre_is_recognised(words: str) -> None:
    text = (f"{INTRO}一个小男孩在海边把小鱼扔回大海。\n请写一篇文章。"
            f"要求：自拟标题，{words}，不少于800字。")
    rule = genre_by_rules(text)
    assert (rule.genre, rule.allowed, rule.open_genre) == (None, (ANY_GENRE,), True)
    assert rule.decided and rule.segment == "requirements"
    assert rule.span is not None and text[rule.span[0]:rule.span[1]] in words


@pytest.mark.parametrize(("text", "allowed"), [
    ("写一篇议论文或记叙文，题目是《坚持》，不少于800字。", ("argumentative", "narrative")),
    ("下面两题任选一题作文。\n（一）以“家乡的味道”为题，写一篇记叙文。\n"
     "（二）以“我眼中的科技生活”为题，写一篇说明文。", ("narrative", "expository")),
    ("以“修剪”为话题写一篇文章，可以写成记叙文，也可以写成议论文。",
     ("argumentative", "narrative")),
])
def test_two_genres_are_a_choice(text: str, allowed: tuple[str, ...]) -> None:
    rule = genre_by_rules(text)
    assert rule.genre is None and not rule.open_genre
    assert rule.allowed == allowed and rule.decided
    assert rule.evidence.startswith("rule: choice of genres")


def test_a_negated_genre_is_not_part_of_a_choice() -> None:
    rule = genre_by_rules("不要写成议论文，写一篇记叙文，讲述一次难忘的经历")
    assert rule.genre == Genre.NARRATIVE and rule.allowed == ("narrative",)


def test_material_cues_do_not_break_a_tie_between_task_cues() -> None:
    # task: 谈谈 (argumentative) vs 成长 (narrative), one each; the material's 故事 and
    # 经历 side with narrative, but the material never decides
    text = f"{INTRO}他讲述了自己的故事和许多难忘的经历。\n请谈谈你的成长。"
    rule = genre_by_rules(text)
    assert rule.genre is None and "tied cues" in rule.evidence
    assert "material (weak, never decides alone): narrative=" in rule.evidence


def test_the_topic_of_an_opinion_is_no_cue_and_naming_the_material_is_material() -> None:
    text = ("以下是一位同学的日记：“今天我第一次独自坐公交车，心里既紧张又兴奋。”\n"
            "读了这篇日记，请谈谈你对成长的看法，不少于600字。")
    rule = genre_by_rules(text)
    assert rule.genre == Genre.ARGUMENTATIVE
    assert rule.evidence.startswith("rule cues: argumentative=2 [谈谈, 看法]")


@pytest.mark.parametrize("text", [
    "给一篇800字的议论文写一段点评，指出论证上的不足",
    "写一个关于小兔子的睡前童话故事，讲给五岁孩子听",
    "帮我写一封300字左右的祝福信，内容需包含对课程的回忆",
])
def test_a_task_asking_for_a_non_essay_decides_no_genre(text: str) -> None:
    rule = genre_by_rules(text)
    assert not rule.decided and rule.not_essay and "not an essay" in rule.evidence
    assert rule.segment == "task" and rule.span is not None


def test_an_essay_product_is_not_mistaken_for_a_non_essay() -> None:
    rule = genre_by_rules("写一篇关于诗歌的议论文，谈谈你的看法")
    assert rule.genre == Genre.ARGUMENTATIVE and not rule.not_essay


def test_traditional_characters_match_and_the_span_quotes_the_original() -> None:
    text = "寫一篇記敘文，講述你的童年往事，不少於600字"
    rule = genre_by_rules(text)
    assert rule.genre == Genre.NARRATIVE and rule.span is not None
    assert text[rule.span[0]:rule.span[1]] == "記敘文"


@pytest.mark.parametrize(("text", "product"), [
    ("帮我写一张请假条，因为得了流感，明天不能上学。", "请假条"),  # a leave letter
    ("请写一篇新闻稿，报道我校的运动会。", "新闻稿"),
    ("以“校园新风”为题写一则消息，不超过200字。", "消息"),
    ("写一篇祭文，悼念去世的祖父。", "祭文"),  # an oration
    ("请写一篇关于供应链管理的文献综述。", "文献综述"),
    ("请围绕某企业的供应链危机写一篇案例分析。", "案例分析"),
    ("请帮我写一篇1500字左右的《百年孤独》的书评。", "书评"),
    ("请写一篇主人公名叫“夜星痕”的失忆少年，性格外冷内热的玄幻小说。", "玄幻小说"),
    ("帮我写一个文章开头，讽刺饭圈现象。", "文章开头"),
    ("给我讲个笑话吧。", "讲个笑话"),  # a joke
    ("阅读下面这封信，改正其中的错误：“亲爱的妈妈，我最近写了一篇作文……”", "改正其中的错误"),
])
def test_letters_news_jokes_reviews_cases_orations_corrections_are_no_essays(
    text: str, product: str,
) -> None:
    """Issue 30, item 2: the rules name these as non-essays, with the reason."""
    rule = genre_by_rules(text)
    assert rule.not_essay and not rule.decided
    assert "the task asks for" in rule.evidence and product in rule.evidence
    assert "not an essay" in rule.evidence


@pytest.mark.parametrize("text", [
    "写一篇记叙文，讲一个关于诚信的故事，字数：500～700字",  # 故事 inside an essay request
    "请以“开头”为题写一篇议论文。",
    "写一篇说明文，介绍一种新闻的写法。",
])
def test_an_essay_request_naming_such_a_word_stays_an_essay(text: str) -> None:
    rule = genre_by_rules(text)
    assert rule.decided and not rule.not_essay


# --- issue 29 item 4: kinds the held-out real prompts still failed on ---------------------
# The cases are the examples, written before the rules were changed.

@pytest.mark.parametrize(("text", "cue"), [
    ("请以“美”为话题，分享你对美的体验或认识，写一篇不少于600字的文章。", "认识"),
    ("请以“寓言”为题，写一篇不少于600字的文章。", "寓言"),
    ("请以“角落”为题，写一篇不少于600字的文章。", "角落"),
    ("请以“那个场面”为题，写一篇不少于600字的文章。", "场面"),
])
def test_a_single_topic_word_in_the_task_decides_no_genre(text: str, cue: str) -> None:
    """A topic word (认识, 寓言, 角落, 场面) names what the essay is about, not how it is
    written: alone it decides nothing; it is still listed for the reviewer."""
    rule = genre_by_rules(text)
    assert rule.genre is None and not rule.decided and not rule.not_essay
    assert cue in rule.evidence


def test_a_topic_word_still_counts_next_to_a_decisive_cue() -> None:
    rule = genre_by_rules("请描写你家附近的一个角落，写一篇不少于600字的文章。")
    assert rule.genre == Genre.DESCRIPTIVE


@pytest.mark.parametrize("words", ["可以大胆选择你最能驾驭的文体", "选定文体",
                                   "选择自己擅长的文体"])
def test_other_open_genre_phrasings_are_recognised(words: str) -> None:
    text = (f"{INTRO}人生如登山，有人只看山顶，有人欣赏沿途的风景。\n请写一篇文章。"
            f"要求：选准角度，{words}，自拟标题，不少于800字。")
    rule = genre_by_rules(text)
    assert (rule.genre, rule.allowed, rule.open_genre) == (None, (ANY_GENRE,), True)
    assert rule.span is not None and text[rule.span[0]:rule.span[1]] in words


@pytest.mark.parametrize("text", [
    "以“路”为话题，自拟题目，不少于600字。",
    f"{INTRO}人生如登山。\n请自拟题目，写作。",
    "请以“温暖”为话题，自拟题目，写一篇议论文。",
])
def test_a_title_of_ones_own_is_no_product(text: str) -> None:
    """自拟题目 tells the writer to choose the title: it is not the thing to write."""
    rule = genre_by_rules(text)
    assert not rule.not_essay and "题目, not an essay" not in rule.evidence


def test_asking_for_a_title_is_still_no_essay() -> None:
    rule = genre_by_rules("帮我拟一个作文题目，主题是环保。")
    assert rule.not_essay


@pytest.mark.parametrize(("text", "product"), [
    ("我明天发烧去不了学校，帮我给班主任王老师请个假。", "请个假"),
    ("帮我向公司请两天假，说明一下原因。", "请两天假"),
    ("把下面的内容整理成一则校园新闻：学校昨天举行了秋季运动会。", "新闻"),
    ("请将这些材料编成一条简讯：社区今天开展了义诊活动。", "简讯"),
])
def test_a_leave_request_or_a_news_item_is_no_essay(text: str, product: str) -> None:
    rule = genre_by_rules(text)
    assert rule.not_essay and not rule.decided
    assert product in rule.evidence


# --- issue 29 item 5: essay kinds the held-out public prompts missed -----------------------

@pytest.mark.parametrize(("text", "genre"), [
    # a popular-law article is a 科普 article: expository, whatever its structure names
    ("你是一名律师，发表一篇关于“正当防卫”的普法文章。文章结构：引言、主题论述、相关案例、"
     "结论与建议，2500字以上。", Genre.EXPOSITORY),
    # a 读书报告 is a reading response (读后感), not a work report
    ("写一篇《平凡的世界》的读书报告，2000字以上。", Genre.ARGUMENTATIVE),
    # 史书中的评价 is what is introduced, not an evaluation asked of the writer
    ("详细介绍李白，以及史书中的评价和他的代表作，3000字。", Genre.EXPOSITORY),
])
def test_essay_kinds_the_public_prompts_missed(text: str, genre: Genre) -> None:
    rule = genre_by_rules(text)
    assert rule.genre == genre and not rule.not_essay, rule.evidence


def test_an_evaluation_asked_of_the_writer_still_counts() -> None:
    rule = genre_by_rules("请评价一下“直播带货”这种现象，写一篇文章，不少于800字。")
    assert rule.genre == Genre.ARGUMENTATIVE


def test_a_work_report_is_still_no_essay() -> None:
    rule = genre_by_rules("帮我写一份本季度的工作报告，2000字。")
    assert rule.not_essay


@pytest.mark.parametrize(("text", "product"), [
    ("请给出一份理由充分的减免学费申请信，600字左右。", "申请信"),  # 给出 names a product
    ("请生成一张迎新晚会的宣传海报。", "海报"),  # and so does 生成
    ("以“城市更新”为题写国内外研究现状，800字左右。", "研究现状"),
])
def test_products_named_after_give_or_generate_and_research_status(
        text: str, product: str) -> None:
    rule = genre_by_rules(text)
    assert rule.not_essay and "the task asks for" in rule.evidence
    assert product in rule.evidence
