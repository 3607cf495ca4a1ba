import random
import unicodedata

import pytest

from essaybench.curate.markup import strip_markup
from essaybench.curate.normalize import KEEP_FULLWIDTH, TRANSLATION, normalize_text

CHINESE_PUNCTUATION = "，。！？：；（）《》〈〉“”‘’、～…—·【】「」"


def test_fullwidth_letters_digits_and_symbols_become_ascii() -> None:
    assert normalize_text("ＡＢＣｘｙｚ０１２３４５６７８９") == "ABCxyz0123456789"
    assert normalize_text("８０％＋５＝８５，ａ＠ｂ．ｃｏｍ／＃１") == "80%+5=85，a@b.com/#1"
    assert normalize_text("２００５年至２００８年间") == "2005年至2008年间"


def test_chinese_punctuation_is_kept() -> None:
    assert normalize_text(CHINESE_PUNCTUATION) == CHINESE_PUNCTUATION
    assert normalize_text("字数：3000～4000字（含标题）！") == "字数：3000～4000字（含标题）！"


def test_exact_fullwidth_mapping() -> None:
    assert frozenset("！（），：；？～") == KEEP_FULLWIDTH
    for cp in range(0xFF01, 0xFF5F):
        ch = chr(cp)
        expected = ch if ch in KEEP_FULLWIDTH else chr(cp - 0xFEE0)
        assert normalize_text(f"字{ch}字") == f"字{expected}字", hex(cp)
    # Outside the block: yen sign and half-width katakana are left alone.
    assert normalize_text("￥100 ｱｲｳ") == "￥100 ｱｲｳ"


def test_ideographic_space_and_whitespace_runs_collapse() -> None:
    assert normalize_text("我\u3000\u3000爱\t\t 北京\u00a0\u2003天安门") == "我 爱 北京 天安门"
    assert normalize_text("  \u3000前后空白\u3000  ") == "前后空白"


def test_zero_width_and_control_characters_are_removed() -> None:
    assert normalize_text("\ufeff作\u200b文\u200c题\u200d目\u2060") == "作文题目"
    assert normalize_text("a\x00b\x07c\x1bd\x7fe\x9ff") == "abcdef"


def test_paragraph_breaks_become_single_newlines() -> None:
    text = "材料：\r\n  人工智能正在改变世界。  \r\n\r\n\r\n\t任务：写一篇议论文。\n"
    assert normalize_text(text) == "材料：\n人工智能正在改变世界。\n任务：写一篇议论文。"
    breaks = "甲\r乙\u2028丙\u2029丁\x85戊\x0b己\x0c庚"
    assert normalize_text(breaks) == "甲\n乙\n丙\n丁\n戊\n己\n庚"
    assert normalize_text("甲\n \u3000 \n\n乙") == "甲\n乙"


def test_nfc_not_nfkc() -> None:
    assert normalize_text("cafe\u0301") == "café"
    assert normalize_text("\uf900") == "\u8c48"  # CJK compatibility ideograph → unified
    # Compatibility characters keep their meaning: NFKC would fold all of these.
    for s in ("①", "10²", "㎡", "ﬁ", "…", "㈠"):
        assert normalize_text(s) == s


def test_empty_and_none() -> None:
    assert normalize_text(None) == ""
    assert normalize_text("") == ""
    assert normalize_text(" \u3000\u200b\n\t\r ") == ""


def test_zero_width_between_letter_and_combining_mark() -> None:
    # Removing U+200B must happen before NFC, or the second pass would compose.
    once = normalize_text("e\u200b\u0301")
    assert once == "é"
    assert normalize_text(once) == once


_ALPHABET = (
    list("ab Zz09，。！？：；（）《》“”、～…")
    + ["写", "作", "文", "议", "论", "\uf900", "\uf901", "é", "\u0301", "\u0308", "\u1100",
       "\u1161", "\u11a8", "\u3000", "\u00a0", "\u2003", "\t", "\n", "\r", "\x0b", "\x0c",
       "\x85", "\u2028", "\u2029", "\x00", "\x07", "\x1c", "\x7f", "\x9f", "\u200b", "\u200c",
       "\u200d", "\u2060", "\ufeff", "😀", "①", "￥"]
    + [chr(cp) for cp in range(0xFF01, 0xFF5F, 7)]
)


def _random_strings(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 40))) for _ in range(n)]


def test_idempotent_and_canonical_on_generated_strings() -> None:
    for s in _random_strings(3000, seed=20250101):
        once = normalize_text(s)
        assert normalize_text(once) == once, repr(s)
        assert unicodedata.is_normalized("NFC", once)
        assert all(TRANSLATION.get(ord(ch), ch) == ch for ch in once), repr(once)
        assert "  " not in once
        for line in once.split("\n") if once else []:
            assert line and line == line.strip(), repr(once)


# -- markup and escape sequences (issue 13: "<script>…" and "[31m" reached the prompt set) --


@pytest.mark.parametrize(("raw", "clean"), [
    ("以“门”为题写一篇作文<script>alert('x')</script>", "以“门”为题写一篇作文"),
    ("<SCRIPT type=text/javascript>\nfetch('/steal')\n</Script >写一篇记叙文", "写一篇记叙文"),
    ("<p>阅读下面的材料。</p><p>写一篇议论文。</p>", "阅读下面的材料。\n写一篇议论文。"),
    ("写<b>一篇</b>作文<br/>不少于<span style='color:red'>800</span>字",
     "写一篇作文\n不少于800字"),
    ("<img src=x onerror=alert(1)>以“桥”为题<!-- 注释 -->写作文", "以“桥”为题写作文"),
    ("＜script＞alert(1)＜/script＞写一篇作文", "写一篇作文"),  # full-width disguise
    ("<scr<b>ipt>alert(1)</script>写作文", "写作文"),  # a tag that appears once one goes
    ("\x1b[31m以“门”为题\x1b[0m写一篇作文", "以“门”为题写一篇作文"),
    ("\x1b[1;31m红色\x1b[m标题\x9b32m绿\x1b]0;标题\x07正文", "红色标题绿正文"),
    ("[31m以“门”为题[0m写一篇作文", "以“门”为题写一篇作文"),  # ESC lost upstream
    ("[1;33;40m警告[0m：写一篇说明文", "警告：写一篇说明文"),
])
def test_markup_and_escape_sequences_are_stripped(raw: str, clean: str) -> None:
    assert normalize_text(raw) == clean
    assert normalize_text(clean) == clean


@pytest.mark.parametrize("text", [
    "以<门>为题写一篇作文", "请以<Home>为题写一篇英语作文", "若a<b且c>d，证明……",
    "跳远成绩[5m]", "在[5min]内完成", "见文献[1]", "3<5，8>2", "&lt;p&gt; 是段落标签",
    "a\x1bd",  # ESC + lower-case letter is no escape sequence: only the control goes
])
def test_text_that_only_looks_like_markup_is_kept(text: str) -> None:
    assert normalize_text(text) == normalize_text(text.replace("\x1b", ""))
    assert normalize_text(text) == text.replace("\x1b", "")


_MARKUP = ["<", ">", "/", "p", "b", "r", "script", "<script>", "</script>", "<p>", "</p>",
           "<br/>", "<!--", "-->", "[", "]", "31", ";", "m", "[0m", "\x1b", "\x1b[", "\x9b",
           "＜", "＞", "［", "写", "文", " ", "\n", "e", "r", "A", "\u0301", "\u030a",
           "\u200b", "<b", "\x1b]", "\x07", "<!doctype"]


def test_markup_stripping_is_idempotent_on_generated_strings() -> None:
    rng = random.Random(13)
    for _ in range(3000):
        s = "".join(rng.choice(_MARKUP) for _ in range(rng.randint(0, 30)))
        once = normalize_text(s)
        assert normalize_text(once) == once, repr(s)
        assert strip_markup(once) == once and "\x1b" not in once, repr(s)


# -- issue 25 item 15: a tag list missed <i>, and "<scr<i>ipt>" left "<scr<i>ipt>alert(1)" --


@pytest.mark.parametrize(("raw", "clean"), [
    ("题目：<i>论诚信</i>", "题目：论诚信"),
    ("<scr<i>ipt>alert(1)</script>", ""),
    ("<scr<i>ipt>alert(1)</script>以“门”为题写作文", "以“门”为题写作文"),
    ("<em>写</em><u>一篇</u><ins>作文</ins><sup>1</sup>", "写一篇作文1"),
    ("<x-note data-a=1>以“桥”为题</x-note>写作文", "以“桥”为题写作文"),  # custom element
    ("<marquee>写</marquee><blink>一篇</blink>作文", "写一篇作文"),  # obsolete ones
    ("<SCR<I>IPT>fetch(1)</SCRIPT>写作文", "写作文"),
])
def test_any_html_tag_goes_to_a_fixed_point(raw: str, clean: str) -> None:
    assert strip_markup(raw) == clean
    assert strip_markup(clean) == clean


@pytest.mark.parametrize("text", [
    "已知a<b，b<c，求证a<c", "若x>0且y<0", "阅读《论语》《孟子》后写一篇读后感",
    "以<门>为题", "用 <= 和 >= 表示大小", "写一篇作文（不少于800字）<<>>",
])
def test_math_and_book_marks_stay(text: str) -> None:
    assert strip_markup(text) == text
