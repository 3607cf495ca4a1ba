from __future__ import annotations

import asyncio
import json
from pathlib import Path

import polars as pl
import pytest
from pydantic import ValidationError

from essaybench.core.hashing import prompt_id
from essaybench.curate.classify import ClassifyParams, arun_classify, run_classify
from essaybench.curate.genre_rules import genre_by_rules
from essaybench.curate.labeler import (
    EssayAnswer,
    FakeLabeler,
    Genre,
    LabelRequest,
    LabelResult,
    LabelStatus,
    PromptSetLabel,
    load_label_template,
    parse_label_reply,
    render_label_prompt,
)
from essaybench.curate.table import CLASSIFY_COLUMNS, FILTER_COLUMNS, RECORD_COLUMNS

ARG_OPEN = "以“底线”为题，写一篇议论文。"
NARR_CONSTRAINED = "请以“那一刻，我长大了”为题，写一篇记叙文，不少于600字。"
UNDECIDED = "以“门”为题写一篇作文。"  # no genre word, no cue
TIED = "谈谈你的成长。"  # argumentative 谈谈 vs narrative 成长
LONG_OPEN = "写一篇议论文，" + "谈谈科技发展与人文精神之间的关系，" * 8  # no constraint, long


def table(texts: list[str]) -> pl.DataFrame:
    n = len(texts)
    data: dict[str, list[str | None]] = {c: [None] * n for c in RECORD_COLUMNS}
    data["record_id"] = [f"r{i}" for i in range(n)]
    data["source"] = ["test"] * n
    data["raw_text"] = list(texts)
    data["decision"] = ["kept"] * n
    data["text"] = list(texts)
    data["prompt_id"] = [prompt_id(t) for t in texts]
    return pl.DataFrame(data, schema={**RECORD_COLUMNS, **FILTER_COLUMNS})


def ok(genre: Genre | None = None, pset: PromptSetLabel | None = None,
       evidence: str = "为题写一篇作文") -> LabelResult:
    """An answer; a genre comes with "essay" and evidence from UNDECIDED's task."""
    return LabelResult(status=LabelStatus.OK, essay=EssayAnswer.ESSAY if genre else None,
                       genre=genre, prompt_set=pset, evidence=evidence)


# --- genre rules -----------------------------------------------------------------------

@pytest.mark.parametrize(("text", "genre", "evidence"), [
    ("写一篇议论文，讲述你的成长经历", Genre.ARGUMENTATIVE, "rule:议论文"),  # word beats cues
    ("以“窗外”为题，写一篇描写文", Genre.DESCRIPTIVE, "rule:描写文"),
    ("以“家乡的秋”为题，写一篇写景散文", Genre.DESCRIPTIVE, "rule:写景散文"),
    ("写一篇科普文章，介绍黑洞", Genre.EXPOSITORY, "rule:科普文章"),
    ("不要写成议论文，写一篇记叙文", Genre.NARRATIVE, "rule:记叙文; ignored negated 议论文"),
    ("除议论文外，写一篇说明文", Genre.EXPOSITORY, "rule:说明文; ignored negated 议论文"),
])
def test_explicit_genre_word_decides(text: str, genre: Genre, evidence: str) -> None:
    rule = genre_by_rules(text)
    assert rule.genre == genre and rule.evidence == evidence


def test_two_genre_words_are_a_choice_not_a_conflict() -> None:
    rule = genre_by_rules("写一篇记叙文或者议论文")
    assert rule.genre is None and rule.allowed == ("argumentative", "narrative")
    assert rule.evidence == "rule: choice of genres 记叙文 (narrative), 议论文 (argumentative)"


@pytest.mark.parametrize(("text", "genre", "cues"), [
    ("谈谈你对“内卷”的看法", Genre.ARGUMENTATIVE, "argumentative=2 [谈谈, 看法]"),
    ("讲述一次难忘的经历", Genre.NARRATIVE, "narrative=3 [讲述, 经历, 难忘]"),
    ("描绘校园一角的景色", Genre.DESCRIPTIVE, "descriptive=3 [描绘, 景色, 一角]"),
    ("介绍彩虹形成的原理", Genre.EXPOSITORY, "expository=2 [介绍, 原理]"),
    ("描写你的爷爷，注重细节描写", Genre.DESCRIPTIVE, "descriptive=1 [描写]"),
])
def test_cues_decide_without_genre_word(text: str, genre: Genre, cues: str) -> None:
    rule = genre_by_rules(text)
    assert rule.genre == genre
    assert rule.evidence.startswith(f"rule cues: {cues}")


@pytest.mark.parametrize(("text", "why"), [
    (UNDECIDED, "no genre word or cue"),
    (TIED, "tied cues"),
    ("写一篇散文", "no genre word or cue"),  # 散文 is a form, not one of the four genres
])
def test_rules_leave_genre_open(text: str, why: str) -> None:
    rule = genre_by_rules(text)
    assert rule.genre is None and why in rule.evidence


# --- the stage, rules only -----------------------------------------------------------------

def test_rules_mode_labels_and_keeps_every_row_in_order() -> None:
    texts = [ARG_OPEN, NARR_CONSTRAINED, UNDECIDED]
    out = run_classify(table(texts), ClassifyParams())
    t = out.table
    assert t["text"].to_list() == texts
    assert set(CLASSIFY_COLUMNS) <= set(t.columns)
    assert t["decision"].to_list() == ["kept", "kept", "unclassified"]
    assert t["reason"].to_list() == [None, None, "genre_undecided"]
    assert t["genre"].to_list() == ["argumentative", "narrative", None]
    assert t["prompt_set"].to_list() == ["open", "constrained", "open"]
    assert t["genre_source"].to_list() == ["rule", "rule", None]
    assert t["set_source"].to_list() == ["rule", "rule", "rule"]
    assert t["set_evidence"][1] == "rule: length:不少于600字"
    constraints = json.loads(t["constraints"][1])
    assert [c["kind"] for c in constraints] == ["title", "length"]
    assert constraints[0]["counts_for_set"] is False  # the given title is the topic
    detail = t["detail"][2]
    assert prompt_id(UNDECIDED) in detail and "genre:" in detail and "override" in detail


def test_boilerplate_alone_keeps_a_prompt_open() -> None:
    t = run_classify(table(["以“走过”为题写一篇记叙文，不得抄袭、套作，不得泄露个人信息。"]),
                     ClassifyParams()).table
    assert t["prompt_set"][0] == "open"
    assert t["set_evidence"][0] == ("rule: no constraint found (not binding: title:以“走过”为题; "
                                    "format:不得抄袭、套作; format:不得泄露个人信息)")


def test_meta_counts_genre_by_set_and_sources() -> None:
    out = run_classify(table([ARG_OPEN, NARR_CONSTRAINED, UNDECIDED]), ClassifyParams())
    meta = out.meta
    assert meta["counts"]["argumentative"] == {"open": 1, "constrained": 0, "total": 1}
    assert meta["counts"]["narrative"] == {"open": 0, "constrained": 1, "total": 1}
    assert meta["counts"]["total"] == {"open": 1, "constrained": 1, "total": 2}
    assert meta["label_sources"]["genre"] == {"rule": 2, "none": 1}
    assert meta["unclassified"] == {"genre_undecided": 1}
    assert meta["llm"] == {"requests": 0, "status": {}, "incomplete": 0}
    assert meta["constraint_kinds"] == {"length": 1}
    json.dumps(meta)  # stored with the snapshot


def test_missing_columns_and_missing_labeler_are_errors() -> None:
    with pytest.raises(ValueError, match="prompt_id"):
        run_classify(table([ARG_OPEN]).drop("prompt_id"), ClassifyParams())
    with pytest.raises(ValueError, match="needs a labeler"):
        run_classify(table([ARG_OPEN]), ClassifyParams(mode="rules+llm"))


def test_params_reject_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        ClassifyParams.model_validate({"mode": "rules", "colour": "red"})
    with pytest.raises(ValidationError):
        ClassifyParams.model_validate({"mode": "llm"})


# --- the LLM step ----------------------------------------------------------------------

def test_labeler_is_asked_only_about_what_rules_left_open() -> None:
    t = table([ARG_OPEN, UNDECIDED, LONG_OPEN])
    fake = FakeLabeler({prompt_id(UNDECIDED): ok(Genre.NARRATIVE),
                        prompt_id(LONG_OPEN): ok(pset=PromptSetLabel.CONSTRAINED)})
    out = run_classify(t, ClassifyParams(mode="rules+llm"), fake)
    asked = {(r.prompt_id, r.need_genre, r.need_set, r.need_essay) for r in fake.calls}
    assert asked == {(prompt_id(UNDECIDED), True, False, True),
                     (prompt_id(LONG_OPEN), False, True, False)}
    row = out.table.row(1, named=True)
    assert (row["genre"], row["genre_source"], row["decision"]) == ("narrative", "llm", "kept")
    assert row["genre_evidence"].startswith("llm: 为题写一篇作文 | rule: undecided")
    assert row["llm_answer"].startswith("llm genre narrative accepted")
    long_row = out.table.row(2, named=True)
    assert (long_row["genre_source"], long_row["set_source"]) == ("rule", "llm")
    assert out.meta["llm"] == {"requests": 2, "status": {"ok": 2}, "incomplete": 0}
    assert out.meta["label_sources"]["genre"] == {"rule": 2, "llm": 1}


def test_rules_mode_never_calls_the_labeler() -> None:
    fake = FakeLabeler(lambda r: ok(Genre.NARRATIVE))
    out = run_classify(table([UNDECIDED]), ClassifyParams(mode="rules"), fake)
    assert fake.calls == [] and out.table["decision"][0] == "unclassified"


def test_long_prompt_without_constraint_is_open_by_rule_in_rules_mode() -> None:
    t = run_classify(table([LONG_OPEN]), ClassifyParams()).table
    assert (t["prompt_set"][0], t["set_source"][0]) == ("open", "rule")
    t = run_classify(table([LONG_OPEN]), ClassifyParams(mode="rules+llm",
                                                        open_rule_max_chars=None),
                     FakeLabeler()).table
    assert (t["prompt_set"][0], t["set_source"][0]) == ("open", "rule")


def crash(request: LabelRequest) -> LabelResult:
    raise ConnectionError(f"gateway down for {request.prompt_id}")


@pytest.mark.parametrize(("labeler", "status", "note"), [
    (FakeLabeler(), "api_error", "no answer"),
    (FakeLabeler({prompt_id(UNDECIDED): LabelResult.failure(LabelStatus.PARSE_ERROR, "not json")}),
     "parse_error", "not json"),
    (FakeLabeler({prompt_id(UNDECIDED): LabelResult.failure(LabelStatus.REFUSED, "no")}),
     "refused", "no"),
    (FakeLabeler(crash), "api_error", "ConnectionError: gateway down"),
])
def test_labeler_failure_never_becomes_a_label(labeler: FakeLabeler, status: str,
                                               note: str) -> None:
    out = run_classify(table([UNDECIDED]), ClassifyParams(mode="rules+llm"), labeler)
    row = out.table.row(0, named=True)
    assert row["genre"] is None and row["genre_source"] is None
    assert (row["decision"], row["reason"]) == ("unclassified", "genre_undecided")
    assert f"llm {status}" in row["detail"] and note in row["detail"]
    assert out.meta["llm"]["status"] == {status: 1}


def test_ok_answer_without_the_asked_label_leaves_row_unresolved() -> None:
    fake = FakeLabeler({prompt_id(UNDECIDED): ok(pset=PromptSetLabel.OPEN)})  # no genre
    out = run_classify(table([UNDECIDED]), ClassifyParams(mode="rules+llm"), fake)
    assert out.table["decision"][0] == "unclassified"
    assert out.table["prompt_set"][0] == "open" and out.table["set_source"][0] == "rule"
    assert out.meta["llm"]["incomplete"] == 1


def test_labeler_calls_are_concurrent_but_bounded() -> None:
    texts = [f"以“门{i}”为题写一篇作文。" for i in range(12)]
    fake = FakeLabeler(lambda r: ok(Genre.NARRATIVE), delay=0.01)
    out = run_classify(table(texts), ClassifyParams(mode="rules+llm", llm_concurrency=3), fake)
    assert len(fake.calls) == 12 and fake.max_in_flight == 3
    assert out.table["genre"].to_list() == ["narrative"] * 12


def test_duplicate_prompt_is_asked_once() -> None:
    fake = FakeLabeler(lambda r: ok(Genre.NARRATIVE))
    out = run_classify(table([UNDECIDED, UNDECIDED]), ClassifyParams(mode="rules+llm"), fake)
    assert len(fake.calls) == 1 and out.table["genre"].to_list() == ["narrative"] * 2


def test_async_variant_and_running_loop_guard() -> None:
    fake = FakeLabeler(lambda r: ok(Genre.DESCRIPTIVE))

    async def main() -> str | None:
        with pytest.raises(RuntimeError, match="arun_classify"):
            run_classify(table([UNDECIDED]), ClassifyParams(mode="rules+llm"), fake)
        out = await arun_classify(table([UNDECIDED]), ClassifyParams(mode="rules+llm"), fake)
        genre: str | None = out.table["genre"][0]
        return genre

    assert asyncio.run(main()) == "descriptive"


# --- overrides -------------------------------------------------------------------------

def write_overrides(tmp_path: Path, entries: dict[str, str]) -> str:
    body = "".join(f"  {pid}:\n{fields}" for pid, fields in entries.items())
    path = tmp_path / "overrides.yaml"
    path.write_text(f"version: 1\noverrides:\n{body}", encoding="utf-8")
    return str(path)


def test_manual_override_wins_over_rule_and_llm(tmp_path: Path) -> None:
    path = write_overrides(tmp_path, {
        prompt_id(ARG_OPEN): "    genre: expository\n    note: 其实是说明\n    reviewer: li\n",
        prompt_id(UNDECIDED): "    genre: descriptive\n    prompt_set: constrained\n",
    })
    fake = FakeLabeler({prompt_id(UNDECIDED): ok(Genre.NARRATIVE)})
    out = run_classify(table([ARG_OPEN, UNDECIDED]),
                       ClassifyParams(mode="rules+llm", overrides_path=path), fake)
    a, u = out.table.row(0, named=True), out.table.row(1, named=True)
    assert (a["genre"], a["genre_source"]) == ("expository", "manual")
    assert a["genre_evidence"].startswith("manual (li): 其实是说明 | was rule:argumentative")
    assert (a["prompt_set"], a["set_source"]) == ("open", "rule")  # not overridden
    assert (u["genre"], u["genre_source"], u["prompt_set"], u["set_source"]) == (
        "descriptive", "manual", "constrained", "manual")
    assert "was llm:narrative" in u["genre_evidence"]
    assert out.meta["overrides"]["applied"] == 2
    assert out.meta["label_sources"]["genre"] == {"manual": 2}


def test_override_resolves_an_unclassified_prompt_in_rules_mode(tmp_path: Path) -> None:
    path = write_overrides(tmp_path, {prompt_id(UNDECIDED): "    genre: narrative\n"})
    out = run_classify(table([UNDECIDED]), ClassifyParams(overrides_path=path))
    assert (out.table["decision"][0], out.table["genre"][0]) == ("kept", "narrative")
    assert "was undecided" in out.table["genre_evidence"][0]


def test_unknown_override_is_reported_not_fatal(tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    stranger = "p0000000000000ff"
    path = write_overrides(tmp_path, {stranger: "    genre: narrative\n"})
    out = run_classify(table([ARG_OPEN]), ClassifyParams(overrides_path=path))
    assert out.meta["unused_overrides"] == [stranger]
    assert out.table["decision"][0] == "kept"
    assert stranger in caplog.text


def test_a_reviewer_removes_a_non_essay_and_records_any_or_a_choice(tmp_path: Path) -> None:
    letter = "帮我写一张请假条，因为得了流感。"
    path = write_overrides(tmp_path, {
        prompt_id(letter): "    not_essay: true\n    note: 请假条\n    reviewer: li\n",
        prompt_id(UNDECIDED): "    allowed_genres: [any]\n",
        prompt_id(TIED): "    allowed_genres: [narrative, argumentative]\n",
    })
    out = run_classify(table([letter, UNDECIDED, TIED]), ClassifyParams(overrides_path=path))
    rows = list(out.table.iter_rows(named=True))
    assert [(r["decision"], r["reason"]) for r in rows] == [
        ("unclassified", "reviewed_not_essay"), ("kept", None), ("kept", None)]
    assert "removed by review, not an essay: manual (li): 请假条" in rows[0]["detail"]
    assert [(r["genre"], r["allowed_genres"], r["genre_open"], r["genre_source"])
            for r in rows[1:]] == [(None, ["any"], True, "manual"),
                                   (None, ["argumentative", "narrative"], False, "manual")]
    assert out.meta["counts"]["total"]["total"] == 2  # the letter is not in the set


def test_invalid_override_file_stops_the_stage(tmp_path: Path) -> None:
    path = write_overrides(tmp_path, {prompt_id(ARG_OPEN): "    genre: poem\n"})
    with pytest.raises(ValueError, match=prompt_id(ARG_OPEN)):
        run_classify(table([ARG_OPEN]), ClassifyParams(overrides_path=path))


# --- labeler interface, template and reply parsing ------------------------------------------

def test_failed_result_cannot_carry_a_label() -> None:
    with pytest.raises(ValidationError):
        LabelResult(status=LabelStatus.API_ERROR, genre=Genre.NARRATIVE)
    with pytest.raises(ValidationError):
        LabelRequest(prompt_id="p", text="x", need_genre=False, need_set=False)


def test_template_renders_only_the_asked_tasks() -> None:
    template = load_label_template()
    both = render_label_prompt(template, LabelRequest(prompt_id="p", text="写$一篇作文",
                                                      need_genre=True, need_set=True))
    assert (both.template_id, both.template_version) == ("classify_prompt", 3)
    assert "是否作文" not in both.user and '"essay": null' in both.user
    first = render_label_prompt(template, LabelRequest(prompt_id="p", text="写一篇作文",
                                                       need_essay=True))
    assert "是否作文" in first.user and '"essay": "essay" | "not_essay" | "unsure"' in first.user
    assert '"any"' in first.user
    old = load_label_template(Path(__file__).resolve().parents[2] / "rubrics" / "classify"
                              / "classify_prompt.v2.yaml")
    with pytest.raises(ValueError, match="cannot ask whether a prompt is an essay"):
        render_label_prompt(old, LabelRequest(prompt_id="p", text="x", need_essay=True))
    assert "写$一篇作文" in both.user and "文体" in both.user and "题目类型" in both.user
    assert '"genre": "argumentative" | "narrative"' in both.user
    assert '"prompt_set": "open" | "constrained"' in both.user
    genre_only = render_label_prompt(template, LabelRequest(prompt_id="p", text="写一篇作文"))
    assert "题目类型" not in genre_only.user and '"prompt_set": null' in genre_only.user
    assert "$" not in genre_only.user + genre_only.system
    assert "作文题目" in genre_only.system or "essay prompt" in genre_only.system.lower()


def test_template_with_unknown_placeholder_is_rejected(tmp_path: Path) -> None:
    raw = (Path(__file__).resolve().parents[2] / "rubrics" / "classify"
           / "classify_prompt.v1.yaml").read_text(encoding="utf-8")
    bad = tmp_path / "bad.yaml"
    bad.write_text(raw.replace("$prompt_text", "$prompt"), encoding="utf-8")
    with pytest.raises(ValueError, match="prompt"):
        load_label_template(bad)


@pytest.mark.parametrize(("reply", "need_set", "status", "genre", "pset"), [
    ('{"genre": "narrative", "prompt_set": null, "evidence": "经历"}', False, "ok",
     Genre.NARRATIVE, None),
    ('```json\n{"genre": "议论文", "prompt_set": "constrained", "evidence": "不少于600字"}\n```',
     True, "ok", Genre.ARGUMENTATIVE, PromptSetLabel.CONSTRAINED),
    ('{"genre": "narrative", "prompt_set": "open", "evidence": "「难忘的经历」"}', False,
     "ok", Genre.NARRATIVE, None),
    ('{"genre": "narrative", "prompt_set": "open"}', False, "parse_error", None, None),
    ('{"genre": "narrative", "evidence": "题目要求写经历"}', False, "parse_error", None, None),
    ('{"genre": "narrative", "evidence": "。"}', False, "parse_error", None, None),
    ('{"genre": null, "evidence": "不是作文题"}', False, "refused", None, None),
    ('{"genre": "poem"}', False, "parse_error", None, None),
    ('{"prompt_set": "open"}', False, "parse_error", None, None),
    ("I think it is narrative.", False, "parse_error", None, None),
    ('{"genre": "narrative"', False, "parse_error", None, None),
])
def test_parse_label_reply(reply: str, need_set: bool, status: str, genre: Genre | None,
                           pset: PromptSetLabel | None) -> None:
    text = "以“一次难忘的经历”为题写一篇作文，不少于600字。"
    result = parse_label_reply(reply, LabelRequest(prompt_id="p", text=text, need_set=need_set))
    assert (result.status.value, result.genre, result.prompt_set) == (status, genre, pset)
