from __future__ import annotations

import json
from pathlib import Path

import pytest

from essaybench.constraints import (
    Constraint,
    binding,
    constraints_json,
    count_chinese_chars,
    count_grid_chars,
    extract_constraints,
    length_requirement,
    parse_number,
)


def kinds(text: str) -> list[str]:
    return [c.kind for c in extract_constraints(text)]


def only(text: str, kind: str) -> Constraint:
    found = [c for c in extract_constraints(text) if c.kind == kind]
    assert len(found) == 1, (text, found)
    return found[0]


# --- numbers and length --------------------------------------------------------------

@pytest.mark.parametrize(("token", "value"), [
    ("800", 800), ("1,000", 1000), ("1.5万", 15000), ("2千", 2000), ("三百", 300),
    ("八百", 800), ("一千二百", 1200), ("一千二", 1200), ("八百五", 850), ("一百零五", 105),
    ("两千", 2000), ("十五", 15), ("二十", 20), ("一万五", 15000), ("千", 1000),
])
def test_parse_number(token: str, value: int) -> None:
    assert parse_number(token) == value


@pytest.mark.parametrize("token", ["五六百", "十百", "abc", "二〇二四"])
def test_parse_number_rejects_non_numbers(token: str) -> None:
    assert parse_number(token) is None


@pytest.mark.parametrize(("text", "evidence", "bounds"), [
    ("写一篇议论文，不少于800字。", "不少于800字", (800, None, None)),
    ("写一篇800字以上的记叙文", "800字以上", (800, None, None)),
    ("字数不低于六百字", "字数不低于六百字", (600, None, None)),
    ("至少600字", "至少600字", (600, None, None)),
    ("字数不少于800", "字数不少于800", (800, None, None)),
    ("写八百余字", "八百余字", (800, None, None)),
    ("600字左右", "600字左右", (None, None, 600)),
    ("约500字", "约500字", (None, None, 500)),
    ("大概700字", "大概700字", (None, None, 700)),
    ("500字以内", "500字以内", (None, 500, None)),
    ("不超过500字", "不超过500字", (None, 500, None)),
    ("不多于500字", "不多于500字", (None, 500, None)),
    ("字数控制在800字以内", "字数控制在800字以内", (None, 800, None)),
    ("300-500字", "300-500字", (300, 500, None)),
    ("300~500字", "300~500字", (300, 500, None)),
    ("600～800字", "600～800字", (600, 800, None)),
    ("300字至500字", "300字至500字", (300, 500, None)),
    ("字数在300到500之间", "字数在300到500之间", (300, 500, None)),
    ("写五六百字", "五六百字", (500, 600, None)),
    ("写三百字", "三百字", (None, None, 300)),
    ("帮我写一篇关于诚信的议论文 八百字", "八百字", (None, None, 800)),
    ("一千二百字的文章", "一千二百字", (None, None, 1200)),
    ("写一篇1,000字的文章", "1,000字", (None, None, 1000)),
    ("写一篇８００字左右的文章", "８００字左右", (None, None, 800)),
    ("用五十字以内概括", "五十字以内", (None, 50, None)),
])
def test_length_forms(text: str, evidence: str, bounds: tuple[int | None, ...]) -> None:
    c = only(text, "length")
    assert c.evidence == evidence
    assert (c.min_chars, c.max_chars, c.approx_chars) == bounds
    assert text[c.span[0]:c.span[1]] == c.evidence
    assert c.counts_for_set


@pytest.mark.parametrize("text", [
    "写一篇记叙文，字数不限。", "2024年的春天来得特别早", "记一次800米跑步比赛", "走到十字路口",
    "背诵三字经", "读《千字文》有感", "差一字之差", "写一篇文章", "作文 800", "写800词的英语作文",
    "2024—2025学年写作练习",
])
def test_not_a_length(text: str) -> None:
    assert "length" not in kinds(text)
    assert length_requirement(text) is None


def test_word_count_unlimited_is_recorded_but_not_binding() -> None:
    c = only("写一篇记叙文，字数不限", "format")
    assert c.evidence == "字数不限" and not c.counts_for_set
    assert binding(extract_constraints("写一篇记叙文，字数不限")) == []


def test_length_after_failed_number_is_still_found() -> None:
    # "一八百" is not a number; the rule must retry and still see 八百字
    assert only("统一八百字", "length").approx_chars == 800


# --- length requirement and character counts -----------------------------------------

def test_length_requirement_combines_bounds() -> None:
    req = length_requirement("不少于600字，不超过800字")
    assert req is not None
    assert (req.min_chars, req.max_chars, req.approx_chars) == (600, 800, None)
    assert req.bounds() == (600, 800)
    assert req.is_met(700) and not req.is_met(599) and not req.is_met(801)
    assert req.evidence == ("不少于600字", "不超过800字")


def test_approx_length_allows_ten_percent() -> None:
    req = length_requirement("800字左右")
    assert req is not None and req.bounds() == (720, 880)
    assert req.is_met(720) and req.is_met(880) and not req.is_met(719) and not req.is_met(881)


def test_approx_and_min_take_the_tighter_bound() -> None:
    req = length_requirement("约800字，至少750字")
    assert req is not None and req.bounds() == (750, 880)


def test_contradicting_lengths_never_make_an_empty_range() -> None:
    # the unnamed 500字 cannot be the body's (it contradicts 不少于800字): it is about
    # something else, and the body keeps its minimum
    req = length_requirement("不少于800字，不超过500字")
    assert req is not None and req.bounds() == (800, None) and req.is_met(900)
    # two lengths that both name the body: the later one is left out, and listed
    req = length_requirement("正文不少于800字，正文不超过500字")
    assert req is not None and req.bounds() == (800, None)
    assert req.evidence == ("不少于800字",) and req.ignored == ("不超过500字",)


def test_count_chinese_chars_counts_ideographs_only() -> None:
    essay = "春天来了，\n小草绿了！ AI和5G。𠀀〇"  # ext-B ideograph and 〇 count
    assert count_chinese_chars(essay) == 11
    # grid count: every non-space character, punctuation and Latin/digits included
    assert count_grid_chars(essay) == 18


def test_counts_of_empty_text() -> None:
    assert count_chinese_chars("") == 0 and count_grid_chars(" \n\t") == 0


# --- paragraphs -----------------------------------------------------------------------

@pytest.mark.parametrize(("text", "lo", "hi"), [
    ("全文分三段", 3, 3), ("分成五段来写", 5, 5), ("不少于5段", 5, None), ("三个段落", 3, 3),
    ("写五个自然段", 5, 5), ("写三段话", 3, 3), ("不超过四段", None, 4), ("三段式", 3, 3),
    ("分三段论述", 3, 3),
])
def test_paragraph_counts(text: str, lo: int | None, hi: int | None) -> None:
    c = only(text, "paragraphs")
    assert (c.min_count, c.max_count) == (lo, hi)


@pytest.mark.parametrize("text", [
    "写一篇记叙文", "写一段难忘的经历", "第三段要写出转折", "运用三段论推理", "记录一段时光",
    "不少于两段经历",
])
def test_not_a_paragraph_count(text: str) -> None:
    assert "paragraphs" not in kinds(text)


# --- title ----------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["题目自拟", "自拟题目", "自拟标题", "标题自拟", "补全题目",
                                  "请将题目补充完整"])
def test_self_made_title_is_binding(text: str) -> None:
    assert only(f"写一篇记叙文，{text}。", "title").counts_for_set


@pytest.mark.parametrize(("text", "value"), [
    ("以《那一刻》为题写一篇记叙文", "那一刻"),
    ("请以“那一刻，我长大了”为题，写一篇记叙文", "那一刻，我长大了"),
    ("请以“说‘慢’”为题写一篇议论文", "说‘慢’"),
    ("议论文 题目：《论“躺平”》 要求：观点明确", "论“躺平”"),
    ("以家乡为题写一篇描写文", "家乡"),
])
def test_given_title_is_the_topic_not_a_constraint(text: str, value: str) -> None:
    c = only(text, "title")
    assert c.value == value and not c.counts_for_set


def test_half_given_title_must_be_completed() -> None:
    c = only("题目：我的____同桌\n写一篇记叙文", "title")
    assert c.value == "我的____同桌" and c.counts_for_set


def test_a_task_after_the_word_title_is_not_a_title() -> None:
    found = extract_constraints("作文题目是写一篇不少于800字的记叙文")
    assert [c.kind for c in found] == ["length"]


def test_mock_exam_is_not_a_title_rule() -> None:
    assert "title" not in kinds("这是一套模拟题目")


def test_requirements_inside_a_given_title_are_the_topic() -> None:
    assert kinds("以《写给妈妈的一封信》为题，写一篇记叙文") == ["title"]
    assert "audience" not in kinds("读《写给孩子的信》有感")


# --- audience, material, style, content, format ------------------------------------------

@pytest.mark.parametrize("text", [
    "写一篇说明文，面向小学生。", "写给妈妈的一封信", "写一篇给小学生看的科普文章",
    "读者是初中生，", "向外国朋友介绍春节", "给小学五年级学生写一篇说明文", "以家长为读者",
])
def test_audience(text: str) -> None:
    assert "audience" in kinds(text)


@pytest.mark.parametrize("text", ["面向未来，写一篇议论文", "面向大海，春暖花开", "给我写一篇作文"])
def test_not_an_audience(text: str) -> None:
    assert "audience" not in kinds(text)


@pytest.mark.parametrize("text", [
    "阅读下面的材料，根据要求写作。", "请根据材料写一篇议论文", "必须引用材料中的信息",
    "请结合材料", "文中引用名言", "引用两句古诗", "续写下面的故事", "看图作文",
])
def test_material(text: str) -> None:
    assert "material" in kinds(text)


@pytest.mark.parametrize("text", [
    "语言生动", "使用比喻和拟人", "用幽默的语言写", "用文言文写", "用第一人称叙述",
    "不少于三个论据", "运用欲扬先抑的写法", "语言风格要幽默风趣", "以一棵树的口吻来写",
    "采用并列式结构", "选取一两件典型事例",
])
def test_style(text: str) -> None:
    assert "style" in kinds(text)


def test_argument_counts() -> None:
    assert only("不少于三个论据", "style").min_count == 3
    c = only("选取一两件典型事例", "style")
    assert (c.min_count, c.max_count) == (1, 2)


@pytest.mark.parametrize(("text", "kind", "evidence"), [
    # issue 15: classical Chinese and rewriting a given text make a prompt Constrained
    ("写一篇文言文", "style", "写一篇文言文"),
    ("写一篇文言短文，记叙你的一次旅行", "style", "写一篇文言短文"),
    ("根据这句诗扩写一篇短文", "material", "扩写一篇"),
    ("续写《皇帝的新装》", "material", "续写《"),
    ("把《背影》改写成一篇记叙文", "material", "改写成"),
    ("仿写一段景物描写", "material", "仿写一段"),
    ("請續寫這個故事", "material", "請續寫"),  # traditional characters, quoted as written
    ("寫一篇文言文", "style", "寫一篇文言文"),
])
def test_classical_chinese_and_rewriting_are_constraints(text: str, kind: str,
                                                         evidence: str) -> None:
    assert [(c.kind, c.evidence) for c in binding(extract_constraints(text))] == [
        (kind, evidence)]


@pytest.mark.parametrize("text", [
    "写一篇文言文的读后感", "写一篇关于文言文的议论文", "他改写了中国航天的历史，写一篇记叙文",
    "“我们是可以改写算法的一代。”读了这段话，写一篇议论文", "穿插一些粉丝才懂的黑话和缩写"])
def test_not_classical_chinese_nor_rewriting(text: str) -> None:
    assert binding(extract_constraints(text)) == []


@pytest.mark.parametrize("text", ["谈谈你对幽默的看法", "谈谈学习文言文的意义", "写一篇议论文"])
def test_not_a_style(text: str) -> None:
    assert "style" not in kinds(text)


def test_content() -> None:
    assert "content" in kinds("文章必须包含三个场景")
    assert "content" in kinds("请结合自己的经历写一篇记叙文")
    # 写出真情实感 is boilerplate, not a content requirement
    assert kinds("要求写出真情实感") == ["format"]


@pytest.mark.parametrize("text", [
    "不得抄袭、套作", "不得泄露个人信息", "文中不得出现真实的人名、校名", "除诗歌外，文体不限",
    "立意自定", "写出真情实感",
])
def test_exam_boilerplate_is_recorded_but_not_binding(text: str) -> None:
    found = extract_constraints(text)
    assert found and all(c.kind == "format" and not c.counts_for_set for c in found)


def test_gaokao_prompt() -> None:
    text = ("阅读下面的材料，根据要求写作。（60分）\n有人说，提问比回答更重要。\n"
            "要求：选准角度，确定立意，明确文体，自拟标题；不要套作，不得抄袭；"
            "不得泄露个人信息；不少于800字。")
    found = extract_constraints(text)
    assert [c.kind for c in binding(found)] == ["material", "title", "length"]
    assert [c.evidence for c in binding(found)] == ["阅读下面的材料", "自拟标题", "不少于800字"]
    spans = [c.span for c in found]
    assert spans == sorted(spans)  # in order of appearance


def test_constraints_json_roundtrip() -> None:
    data = json.loads(constraints_json(extract_constraints("分三段，不少于800字")))
    assert data == [
        {"kind": "paragraphs", "text": "分三段", "span": [0, 3], "counts_for_set": True,
         "min_count": 3, "max_count": 3},
        {"kind": "length", "text": "不少于800字", "span": [4, 11], "counts_for_set": True,
         "min_chars": 800, "target": "body"},
    ]


def test_real_prompts_evidence_matches_spans(shared_data: Path) -> None:
    prompts = [json.loads(line)["prompt"] for line in
               (shared_data / "writingpreferencebench" / "prompts.jsonl").open(encoding="utf-8")]
    n_length = 0
    for text in prompts:
        for c in extract_constraints(text):
            assert text[c.span[0]:c.span[1]] == c.evidence
            n_length += c.kind == "length"
    assert n_length >= 5


def test_fast_counts_equal_the_per_character_definitions() -> None:
    """The regex counts agree with the per-character rules on every code point."""
    import random

    from essaybench.constraints.counting import _is_ideograph, count_chinese_chars, count_grid_chars

    every = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)
    assert count_chinese_chars(every) == sum(1 for ch in every if _is_ideograph(ch))
    assert count_grid_chars(every) == sum(1 for ch in every
                                          if not ch.isspace() and ch.isprintable())
    rng = random.Random(0)
    pool = "门远方，。 \n\t\u3000\u200b\x00a1〇𠀀\u2028"
    for _ in range(200):
        text = "".join(rng.choice(pool) for _ in range(rng.randrange(0, 40)))
        assert count_chinese_chars(text) == sum(1 for ch in text if _is_ideograph(ch))
        assert count_grid_chars(text) == sum(1 for ch in text
                                             if not ch.isspace() and ch.isprintable())
