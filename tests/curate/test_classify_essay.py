"""The labeller first says whether a request asks for an essay at all (issue 30, item 1):
not_essay keeps the prompt out of the set with its reason, unsure sends it to review, and
an essay may be any genre or a choice of genres."""

from __future__ import annotations

import json

import pytest

from essaybench.core.hashing import prompt_id
from essaybench.curate.classify import ClassifyParams, run_classify
from essaybench.curate.labeler import (
    EssayAnswer,
    FakeLabeler,
    Genre,
    LabelRequest,
    LabelResult,
    LabelStatus,
    parse_label_reply,
)
from tests.curate.test_classify import table

UNDECIDED = "以“门”为题写一篇作文。"
NOTE = "以“门”为题写一段话，不少于200字。"  # not an essay by any rule, not a product either


def labelled(text: str, result: LabelResult, **params: object) -> dict[str, object]:
    fake = FakeLabeler({prompt_id(text): result})
    out = run_classify(table([text]), ClassifyParams(mode="rules+llm", **params), fake)  # type: ignore[arg-type]
    assert [r.need_essay for r in fake.calls] == [True]
    return out.table.row(0, named=True)


def test_not_essay_keeps_the_prompt_out_with_the_labellers_reason() -> None:
    row = labelled(UNDECIDED, LabelResult(status=LabelStatus.OK, essay=EssayAnswer.NOT_ESSAY,
                                          evidence="为题写一篇作文"))
    assert (row["decision"], row["reason"], row["genre"]) == (
        "unclassified", "llm_not_essay", None)
    assert "the labeller says the request asks for no essay" in str(row["detail"])
    assert row["llm_answer"] == "llm not_essay: '为题写一篇作文'"


def test_not_essay_with_evidence_that_shows_nothing_is_not_taken() -> None:
    row = labelled(UNDECIDED, LabelResult(status=LabelStatus.OK, essay=EssayAnswer.NOT_ESSAY,
                                          evidence="门"))
    assert (row["decision"], row["reason"]) == ("unclassified", "genre_undecided")
    assert str(row["llm_answer"]).startswith("llm not_essay rejected: its evidence '门' shows")


def test_unsure_goes_to_review() -> None:
    row = labelled(UNDECIDED, LabelResult(status=LabelStatus.OK, essay=EssayAnswer.UNSURE,
                                          evidence="看不出要写什么"))
    assert (row["decision"], row["reason"]) == ("unclassified", "llm_unsure")
    assert "llm unsure" in str(row["llm_answer"])


@pytest.mark.parametrize(("allowed", "open_genre"), [
    (("any",), True), (("argumentative", "narrative"), False)])
def test_an_essay_of_any_genre_or_a_choice_is_kept_as_a_choice(
    allowed: tuple[str, ...], open_genre: bool,
) -> None:
    answer = LabelResult(status=LabelStatus.OK, essay=EssayAnswer.ESSAY, allowed_genres=allowed,
                         evidence="为题写一篇作文")
    row = labelled(UNDECIDED, answer)
    assert (row["decision"], row["genre"], row["allowed_genres"], row["genre_open"],
            row["genre_source"]) == ("kept", None, list(allowed), open_genre, "llm")
    off = labelled(UNDECIDED, answer, keep_genre_choice=False)
    assert off["decision"] == "unclassified"


def test_a_not_essay_or_unsure_answer_carries_no_genre() -> None:
    with pytest.raises(ValueError, match="carries no genre"):
        LabelResult(status=LabelStatus.OK, essay=EssayAnswer.NOT_ESSAY, genre=Genre.NARRATIVE)


ASKED = LabelRequest(prompt_id="p", text="帮我写一张请假条，因为得了流感。", need_essay=True)


def answer(**fields: object) -> str:
    return json.dumps({"essay": None, "genre": None, "prompt_set": None, "evidence": "",
                       **fields}, ensure_ascii=False)


@pytest.mark.parametrize(("reply", "expected"), [
    (answer(essay="not_essay", evidence="写一张请假条"),
     LabelResult(status=LabelStatus.OK, essay=EssayAnswer.NOT_ESSAY, evidence="写一张请假条")),
    (answer(essay="unsure", evidence="不确定"),
     LabelResult(status=LabelStatus.OK, essay=EssayAnswer.UNSURE, evidence="不确定")),
    (answer(essay="essay", genre="any", evidence="写一张请假条"),
     LabelResult(status=LabelStatus.OK, essay=EssayAnswer.ESSAY, allowed_genres=("any",),
                 evidence="写一张请假条")),
    (answer(essay="essay", genre=["记叙文", "argumentative"], evidence="写一张请假条"),
     LabelResult(status=LabelStatus.OK, essay=EssayAnswer.ESSAY,
                 allowed_genres=("argumentative", "narrative"), evidence="写一张请假条")),
    (answer(essay="essay", genre=["narrative"], evidence="写一张请假条"),
     LabelResult(status=LabelStatus.OK, essay=EssayAnswer.ESSAY, genre=Genre.NARRATIVE,
                 evidence="写一张请假条")),
])
def test_the_essay_answer_is_read_first(reply: str, expected: LabelResult) -> None:
    assert parse_label_reply(reply, ASKED) == expected


@pytest.mark.parametrize(("reply", "status", "error"), [
    (answer(genre="narrative", evidence="写一张请假条"), "refused", "no essay answer"),
    ('{"genre": "narrative", "prompt_set": null, "evidence": "写一张请假条"}', "parse_error",
     "reply has no 'essay'"),
    (answer(essay="maybe"), "parse_error", "essay 'maybe' is not one of"),
    (answer(essay="not_essay", evidence="一张假条"), "parse_error", "not_essay rejected"),
    (answer(essay="essay", genre=["any", "narrative"], evidence="写一张请假条"), "parse_error",
     "is not one of"),
])
def test_a_wrong_essay_answer_is_no_answer(reply: str, status: str, error: str) -> None:
    got = parse_label_reply(reply, ASKED)
    assert (got.status.value, got.essay, got.genre) == (status, None, None)
    assert error in (got.error or "")


def test_a_labeller_genre_needs_an_essay_task_cue_in_the_prompt() -> None:
    """Issue 30, item 2: "谈谈我的经历" holds genre cues (a tie) but no 作文, 文章, 写一篇,
    length or title: the labeller's genre is not accepted, the prompt goes to review."""
    text = "谈谈我的经历"
    answer = LabelResult(status=LabelStatus.OK, essay=EssayAnswer.ESSAY, genre=Genre.NARRATIVE,
                         evidence="谈谈我的经历")
    row = labelled(text, answer)
    assert (row["decision"], row["reason"], row["genre"]) == (
        "unclassified", "genre_undecided", None)
    assert "holds no essay-task cue" in str(row["llm_answer"])
    with_cue = labelled(text + "，写一篇作文", answer)
    assert (with_cue["decision"], with_cue["genre"]) == ("kept", "narrative")


def test_a_long_prompt_the_labeller_gives_no_set_is_open_as_in_rules_only() -> None:
    """rules+llm is never worse than rules only: a failed set answer for a long prompt
    without a constraint leaves it open (as rules alone say), not unclassified."""
    from tests.curate.test_classify import LONG_OPEN

    failed = FakeLabeler({prompt_id(LONG_OPEN): LabelResult.failure(
        LabelStatus.PARSE_ERROR, "evidence copied from the template")})
    out = run_classify(table([LONG_OPEN]), ClassifyParams(mode="rules+llm"), failed)
    row = out.table.row(0, named=True)
    assert [r.need_set for r in failed.calls] == [True]
    assert (row["decision"], row["prompt_set"], row["set_source"]) == ("kept", "open", "rule")
    assert "the labeller gave no set (llm parse_error: evidence copied" in row["set_evidence"]
    rules_only = run_classify(table([LONG_OPEN]), ClassifyParams()).table.row(0, named=True)
    assert (rules_only["decision"], rules_only["prompt_set"]) == ("kept", "open")


@pytest.mark.parametrize("text", ["我明天发烧去不了学校，帮我给班主任王老师请个假。",
                                  "把下面的内容整理成一则校园新闻：学校昨天举行了秋季运动会。"])
def test_a_leave_request_or_a_news_item_stays_out_without_asking_the_labeller(text: str) -> None:
    """Issue 29: the rules, not an undecided genre, keep them out; in rules+llm mode an
    always-a-genre labeller is never asked about them."""
    fake = FakeLabeler({prompt_id(text): LabelResult(
        status=LabelStatus.OK, essay=EssayAnswer.ESSAY, genre=Genre.ARGUMENTATIVE,
        evidence=text[:8])})
    row = run_classify(table([text]), ClassifyParams(mode="rules+llm"), fake).table.row(
        0, named=True)
    assert (row["decision"], row["reason"], row["genre"]) == (
        "unclassified", "genre_not_essay", None)
    assert [r.need_genre for r in fake.calls] in ([], [False])
