"""Person names: the ones a request introduces as someone's are masked; public figures
in essay material, words that start with a surname character, and titles alone stay."""

from __future__ import annotations

import pytest

from essaybench.curate.pii import find_personal_data


def names(text: str, mode: str = "cued") -> list[str]:
    return [text[s.start:s.end] for s in find_personal_data(text, names=mode)
            if s.kind == "name"]


@pytest.mark.parametrize(("text", "expected"), [
    ("我叫张伟，今年上初二", ["张伟"]),
    ("我的同学李小明让我帮他写作文", ["李小明"]),
    ("我儿子欧阳子轩在实验中学", ["欧阳子轩"]),
    ("我女儿叫王梓涵，想写一篇作文", ["王梓涵"]),
    ("我是初二3班的张雨涵，帮我写作文", ["张雨涵"]),
    ("我妈叫刘秀英，帮我写她的故事", ["刘秀英"]),
    ("我们班的张伟同学和陈建国经理都要一份", ["张伟", "陈建国"]),
])
def test_introduced_names_are_found(text: str, expected: list[str]) -> None:
    assert names(text) == expected


@pytest.mark.parametrize("text", [
    "请以鲁迅先生的话为题，写一篇议论文",
    "李白和苏轼都写过月亮，谈谈你的理解",
    "袁隆平爷爷的故事给了你什么启示",
    "学生时代的同学关系值得珍惜",
    "高三学生王喆在作文中写道：“我们这一代人……”",
    "我出生在一个叫作柳河的小镇",
    "同学们，我妈妈常说要珍惜时间",
    "王老师说要写800字",
    "我向语文老师请教写作方法",
    "写一篇关于张桂梅老师的作文",
    "老师让写议论文，材料是“孔融让梨”",
])
def test_no_name_is_masked_in_essay_material(text: str) -> None:
    assert names(text) == []


def test_the_tagger_finds_more_and_masks_essay_material_too() -> None:
    # Why "tagged" is not the default (benchmarks/deid.py measures it on the sample).
    assert names("高中语文写作专题训练题库", "tagged") != []
    assert names("高中语文写作专题训练题库") == []
