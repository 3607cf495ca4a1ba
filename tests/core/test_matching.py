from __future__ import annotations

import pytest

from essaybench.core.matching import matching_text


@pytest.mark.parametrize(("text", "expected"), [
    ("寫一篇記敘文", "写一篇记叙文"),
    ("題目自擬，不少於八百字", "题目自拟，不少于八百字"),
    ("讀了上述材料，你有什麼感悟？", "读了上述材料，你有什么感悟？"),
    ("續寫、擴寫、改寫", "续写、扩写、改写"),
    ("説明文與議論文", "说明文与议论文"),
    # phrase-aware: 著名 and 乾隆 are simplified already, 乾燥 is not
    ("著名的乾隆皇帝怕乾燥", "著名的乾隆皇帝怕干燥"),
])
def test_traditional_characters_read_as_simplified(text: str, expected: str) -> None:
    assert matching_text(text) == expected


@pytest.mark.parametrize("text", [
    "", "写一篇记叙文，题目自拟。", "「引号」『书名』…—·", "ASCII only 123", "𠀀〇二〇二四年"])
def test_simplified_and_other_text_is_unchanged(text: str) -> None:
    assert matching_text(text) == text


def test_every_offset_is_kept() -> None:
    # every BMP ideograph, one at a time and all together: one character for one
    every = "".join(chr(cp) for cp in range(0x4E00, 0xA000))
    assert len(matching_text(every)) == len(every)
    changed = sum(a != b for a, b in zip(every, matching_text(every), strict=True))
    assert changed > 2000  # OpenCC's table, not a handful of hand-picked characters
