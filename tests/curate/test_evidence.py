"""A labeller's evidence must carry its answer (issue 30, item 3): at least four
characters, holding a cue the rules know, in the task or requirements, outside quotes."""

from __future__ import annotations

import pytest

from essaybench.curate.evidence import check_evidence, essay_task_cue, quoted_spans
from essaybench.curate.prompt_parts import split_prompt

QUOTING = "有人说“写作文就是讲经历”，请谈谈你的看法，写一篇文章。"
MATERIAL = ("阅读下面的材料：一位老人讲述了自己四十年来的成长经历。"
            "请结合材料写一篇文章，不少于800字。")
LEAVE = "帮我写一张请假条，因为得了流感，明天不能上学。"


def check(evidence: str, text: str) -> str | None:
    return check_evidence(evidence, text, split_prompt(text)).problem


@pytest.mark.parametrize(("evidence", "text"), [
    ("流", LEAVE), ("流感", LEAVE), ("800字", MATERIAL), ("“800”", MATERIAL), ("经历", MATERIAL),
])
def test_a_span_without_four_letters_shows_nothing(evidence: str, text: str) -> None:
    assert "shows nothing" in (check(evidence, text) or "")


def test_a_span_without_a_cue_is_refused() -> None:
    assert "holds no cue" in (check("明天不能上学", LEAVE) or "")


def test_a_cue_inside_quotation_marks_is_quoted_material() -> None:
    # the quotation is short, so the segmenter leaves it in the task sentence
    assert split_prompt(QUOTING).segment_at(QUOTING.index("讲经历")) == "task"
    problem = check("写作文就是讲经历", QUOTING)
    assert problem is not None and "inside quotation marks" in problem
    assert check("请谈谈你的看法", QUOTING) is None


def test_a_cue_only_in_the_material_is_refused_and_one_in_the_task_accepted() -> None:
    assert "only in the material" in (check("讲述了自己四十年来的成长经历", MATERIAL) or "")
    accepted = check_evidence("请结合材料写一篇文章", MATERIAL, split_prompt(MATERIAL))
    assert (accepted.problem, accepted.segment) == (None, "task")
    assert accepted.cue in ("写一篇", "文章")


def test_evidence_that_is_no_passage_is_refused() -> None:
    assert check("请写一篇议论文", LEAVE) == "is not a passage of the prompt"
    assert check("。", QUOTING) == "is not a passage of the prompt"  # punctuation alone


def test_quoted_spans_leave_titles_alone() -> None:
    text = "读了《故乡》，有人说“故乡是心里的地方”。"
    assert [text[a:b] for a, b in quoted_spans(text)] == ["“故乡是心里的地方”"]


@pytest.mark.parametrize(("text", "cue"), [
    ("以“门”为题写一篇作文。", "为题"), (QUOTING, "作文") , (LEAVE, None),
    ("阅读下面这封信：“……我写了一篇作文……”。请改正信中的错别字。", None),
    ("谈谈你对诚信的理解，不少于600字。", "不少于600字"),
])
def test_the_essay_task_cue_is_read_outside_quotes_in_the_task(text: str, cue: str | None) -> None:
    found = essay_task_cue(text, split_prompt(text))
    if cue == "作文":  # QUOTING: 作文 is quoted; the task's own 写一篇 counts
        assert found == "写一篇"
    else:
        assert found == cue
