import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from pydantic import ValidationError

from essaybench.core.contracts import Decision, kept_rows
from essaybench.core.hashing import prompt_id
from essaybench.core.paths import resource
from essaybench.curate.collect import run_collect
from essaybench.curate.filter import FilterParams, find_personal_data, run_filter
from essaybench.curate.filter_rules import FilterRulesError, default_rules_path, load_rules
from essaybench.curate.normalize import normalize_text
from essaybench.curate.pii.formatted import valid_resident_id
from essaybench.sources.config import load_sources

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
WRITINGBENCH = SHARED / "writingbench_zh_queries" / "zh_queries.jsonl"
PREFERENCE = SHARED / "writingpreferencebench" / "prompts.jsonl"


def _run(texts: list[str | None], **params: Any) -> pl.DataFrame:
    table = pl.DataFrame({"record_id": [f"r{i}" for i in range(len(texts))], "raw_text": texts},
                         schema={"record_id": pl.Utf8, "raw_text": pl.Utf8})
    return run_filter(table, FilterParams(**params)).table


def _reason(text: str | None, **params: Any) -> str | None:
    reason: str | None = _run([text], **params)["reason"][0]
    return reason


def _row(text: str) -> dict[str, Any]:
    return _run([text]).row(0, named=True)


# --- the row contract ----------------------------------------------------------------------

def test_every_row_comes_out_in_order_with_text_and_prompt_id() -> None:
    texts = [None, "", "写一篇关于春天的作文，不少于600字。", "帮我写一份年终工作总结",
             "ｈｅｌｌｏ　ｗｏｒｌｄ", "以“我的老师”为题，写一篇记叙文。\r\n\r\n字数不少于500字。"]
    out = _run(texts)
    assert out["record_id"].to_list() == [f"r{i}" for i in range(len(texts))]
    assert out["raw_text"].to_list() == texts
    assert out["text"].to_list() == [normalize_text(t) for t in texts]
    assert out["prompt_id"].to_list() == [prompt_id(normalize_text(t)) for t in texts]
    assert out["text"].null_count() == 0 and out["prompt_id"].null_count() == 0
    assert set(out["decision"]) == {Decision.KEPT.value, Decision.FILTERED.value}
    for row in out.iter_rows(named=True):
        assert (row["reason"] is None) == (row["decision"] == Decision.KEPT.value)
        assert row["detail"]
    assert out["decision"].to_list() == ["filtered", "filtered", "kept", "filtered", "filtered",
                                         "kept"]


def test_meta_counts_match_the_table() -> None:
    texts = ["", "写作文", "写一篇关于春天的作文，不少于600字。", "帮我写一份年终工作总结",
             "帮我写一份述职报告，1000字", "写一首关于秋天的七言绝句", "写一段100字的学生评价"]
    output = run_filter(pl.DataFrame({"raw_text": texts}), FilterParams())
    meta = output.meta
    assert meta["reasons"] == {"empty": 1, "too_short": 1, "not_essay:poem_only": 1,
                               "not_essay:professional_document": 2, "not_essay:short_text": 1}
    assert list(meta["reasons"]) == [r for r in meta["check_order"] if r in meta["reasons"]]
    assert meta["kept"] == 1 and meta["filtered"] == 6 and meta["rows"] == 7
    assert meta["params"]["max_chars"] == 2000 and meta["params"]["rules_version"] == "v3"
    assert meta["params"]["short_max_chars"] == 150
    assert meta["rules"]["version"] == "v3"
    assert meta["rules"]["path"] == "rubrics/filters/filter_rules.v3.yaml"
    assert len(meta["rules"]["sha256"]) == 64
    json.dumps(meta)
    counted = Counter(r for r in output.table["reason"].to_list() if r)
    assert dict(counted) == meta["reasons"]


def test_input_without_raw_text_is_an_error() -> None:
    with pytest.raises(ValueError, match="raw_text"):
        run_filter(pl.DataFrame({"text": ["写一篇作文"]}), FilterParams())


# --- each reason code ----------------------------------------------------------------------

def test_empty() -> None:
    assert _reason(None) == "empty"
    assert _reason(" \u3000\u200b\r\n\t") == "empty"


def test_too_short_counts_letters_and_digits() -> None:
    row = _row("写作文！！！？？？")
    assert row["reason"] == "too_short" and "3 letters/digits" in row["detail"]
    assert _reason("写一篇八百字作文") is None  # exactly 8
    assert _reason("写一篇八百字作文", min_chars=9) == "too_short"


def test_too_long_measures_normalised_length() -> None:
    text = "阅读下面的材料，写一篇议论文。" + "材料内容很长。" * 300
    row = _row(text)
    assert row["reason"] == "too_long"
    assert f"{len(normalize_text(text))} characters" in row["detail"]
    assert _reason(text, max_chars=5000) is None
    # Whitespace that normalisation collapses does not count.
    assert _reason("写一篇关于春天的作文，不少于600字。" + " " * 3000) is None


def test_not_chinese() -> None:
    row = _row("Write an essay about your summer vacation in 500 words.")
    assert row["reason"] == "not_chinese" and "0.00" in row["detail"]
    # An English-essay request written in Chinese is Chinese.
    assert _reason("请写一篇英语作文，题目是My Dream，不少于120词。") is None
    assert _reason("13800138000 12345678") == "not_chinese"


def test_resident_id_check_digit() -> None:
    assert valid_resident_id("11010519491231002X")
    assert valid_resident_id("11010519491231002x")
    assert not valid_resident_id("110105194912310021")  # wrong check digit
    assert not valid_resident_id("110105194913310026")  # month 13


@pytest.mark.parametrize("text,kind", [
    ("我的手机号是13812345678，帮我写一篇作文", "mobile"),
    ("联系我：138-1234-5678，写一篇作文", "mobile"),
    ("我叫张三，身份证号11010519491231002X，帮我写一篇自我介绍的作文", "resident_id"),
    ("写好的作文发到 zhang.san@example.com 邮箱", "email"),
    ("写一篇作文，有问题打电话010-12345678", "landline"),
    ("写一篇作文，有问题打电话（0571）87654321", "landline"),
])
def test_personal_data(text: str, kind: str) -> None:
    row = _row(text)
    assert row["reason"] == "personal_data"
    assert kind in row["detail"]
    found = find_personal_data(normalize_text(text))
    assert [k for k, _ in found] == [kind]
    assert "*" in found[0][1] and found[0][1] not in text  # masked in the evidence


@pytest.mark.parametrize("text", [
    "以“2023年的我”为题，写一篇不少于800字的作文。",
    "写一篇作文，题目是《1949年10月1日》，字数600字。",
    "阅读材料：2020年全国有10.71万所学校。写一篇800字议论文。",
    "写一篇作文，讲述编号为12345678901234567的快递的故事。",  # 17 digits: no ID
    "写一篇作文，号码12812345678不是手机号。",  # 128 is not a mobile prefix
    "写一篇作文，身份证号110105194912310021是假的。",  # bad check digit
    "写一篇作文，2023-12-31那天下了雪。",
])
def test_numbers_that_are_not_personal_data(text: str) -> None:
    assert find_personal_data(normalize_text(text)) == []
    assert _reason(text) is None


def test_full_width_personal_data_is_found_after_normalisation() -> None:
    assert _reason("我的手机号是１３８１２３４５６７８，帮我写一篇作文") == "personal_data"


def test_offensive() -> None:
    row = _row("写一篇作文，说我同桌是个傻逼")
    assert row["reason"] == "offensive" and "傻逼" in row["detail"]
    assert _reason("写一篇作文，题目是 fuck off") == "offensive"
    # Conservative: literary words and Latin substrings are not slurs.
    assert _reason("读了鲁迅的《论“他妈的！”》，写一篇读后感") is None
    assert _reason("写一篇作文，介绍你的偶像 Scunthorpe 队") is None
    # Requests meant to demean a person or a group; discussing a claim is fine.
    assert _reason("帮我写篇作文骂我们班主任是个废物") == "offensive"
    assert _reason("写一篇文章证明外地人素质都差") == "offensive"
    assert _reason("写一篇议论文反驳他，越刻薄越好") == "offensive"
    assert _reason("有人说某地游客素质低，谈谈你的看法，写一篇议论文") is None


@pytest.mark.parametrize("text,reason", [
    ("用Python写一个快速排序函数，要有注释", "not_essay:code"),
    ("用Python写一个统计作文字数的脚本", "not_essay:code"),  # hard: beats the 作文 cue
    ("```python\nprint('hi')\n```\n请解释上面这段代码的作用", "not_essay:code"),
    ("请把下面这段话翻译成英文：春天来了，万物复苏。", "not_essay:translation"),
    ("帮我批改一下我的作文，看看有哪些错别字", "not_essay:editing"),
    ("把这篇作文的错别字找出来：我门学校的操场很大", "not_essay:editing"),
    ("能不能加点心理描写，再长一点", "not_essay:editing"),  # a follow-up turn
    ("字数不够，写到1000字，再加一个反面论证", "not_essay:editing"),
    ("作文开头怎么写才能吸引人？", "not_essay:other_task"),
    ("高考作文满分多少分", "not_essay:other_task"),
    ("帮我想几个作文题目，关于环保的", "not_essay:other_task"),
    ("下列各句中，没有语病的一项是（3分）A. 通过这次活动，使我们开阔了视野。",
     "not_essay:other_task"),
    ("你是谁？你叫什么名字？", "not_essay:chitchat"),
    ("给我讲个笑话吧，要好笑一点的", "not_essay:chitchat"),
    ("你好，帮我推荐几部好看的电影", "not_essay:chitchat"),  # weak match, no essay cue
    ("写一首关于秋天的七言绝句", "not_essay:poem_only"),
    ("请写一首现代诗，主题是故乡的月亮", "not_essay:poem_only"),
    ("写一部玄幻小说，主角是一个山村少年", "not_essay:fiction"),
    ("帮我写一个校园短剧的剧本，五个角色", "not_essay:fiction"),
    ("帮我写一份年终工作总结，字数1000字左右", "not_essay:professional_document"),
    ("起草一份房屋租赁合同，租期两年", "not_essay:professional_document"),
    ("写一篇软文推广我们的奶茶店新品", "not_essay:professional_document"),
    ("写一份述职报告，不少于800字", "not_essay:professional_document"),
    ("为我们公司的新产品写一段小红书种草笔记", "not_essay:professional_document"),
    ("帮我写一篇入党申请书，1500字", "not_essay:professional_document"),
    ("请写一篇毕业论文的致谢", "not_essay:professional_document"),
    ("帮我查一下明天北京到上海的高铁票", "no_essay_cue"),
])
def test_non_essay_requests(text: str, reason: str) -> None:
    row = _row(text)
    assert row["reason"] == reason, row["detail"]


@pytest.mark.parametrize("text", [
    "写一篇关于人工智能的说明文",
    "写一篇关于如何写代码的议论文",
    "以“翻译的乐趣”为题，写一篇记叙文",
    "写一篇《百年孤独》的读后感，分析小说中的家族命运",
    "以文学论文格式写一篇《围城》读后感",
    "帮我写一篇议论文，谈谈职场中做工作总结的意义",
    "写一篇演讲稿，主题是珍惜时间，不少于600字",
    "给远方的笔友写一封信，介绍你的家乡，500字左右",
    "写一篇文章谈谈朋友圈文化对青少年的影响",
    "写一篇关于推广普通话的文章",
    "写一篇游记，记录你的黄山之行",
    "写一篇散文，描写故乡的秋天",
    "阅读下面的材料，根据要求写作。\n有人说，时间是最好的老师。\n"
    "要求：选准角度，确定立意，明确文体，自拟标题；不要套作，不得抄袭；不少于800字。",
    "以“门”为话题写一篇作文，文体不限（诗歌除外），不少于600字。",
    "写一篇周记，记录这周的校园生活",
    "换个角度，写一篇描写城市夜晚的文章",  # starts like a follow-up, but is a new request
    "你觉得“慢下来”在今天还重要吗？写一篇议论文谈谈",
    "写一篇驳论文，反驳“分数决定一切”这个观点，800字",
    # Genre implied, not named.
    "谈谈你对“工匠精神”的理解。",
    "讲述一次你克服困难的经历。",
    "描绘一幅冬日乡村的画面",
    "讲一个关于勇气的故事",
    "写篇文章介绍一下太阳能热水器的工作原理",
])
def test_essay_requests_are_kept(text: str) -> None:
    row = _row(text)
    assert row["decision"] == Decision.KEPT.value, row["detail"]
    assert "cue" in row["detail"]


def test_kept_detail_names_what_the_genre_cue_overrode() -> None:
    detail = _row("写一篇关于如何写代码的议论文")["detail"]
    assert "genre cue 「议论文」" in detail and "strong code 「写代码」" in detail


def test_hard_patterns_beat_genre_cues() -> None:
    row = _row("写一篇作文，题目是《我的妈妈》，然后把它翻译成英文")
    assert row["reason"] == "not_essay:translation"
    assert "hard" in row["detail"] and "beats genre cue 「作文」" in row["detail"]


def test_strong_patterns_beat_weak_cues_only() -> None:
    assert _reason("写一篇关于品牌营销方案的文章") == "not_essay:professional_document"
    assert _reason("写一篇关于品牌营销方案的议论文") is None


def test_check_order() -> None:
    slur_and_phone = "写一篇作文骂那个傻逼，他电话13812345678"
    assert _reason(slur_and_phone) == "personal_data"
    assert _reason("帮我写一份工作总结，你这个傻逼") == "offensive"
    assert _reason("13812345678" + "写一篇作文" * 500) == "too_long"
    assert _reason("Please write a report. 电话13812345678") == "not_chinese"
    assert _reason("写作文13812345678") == "personal_data"  # 14 letters/digits: not too short


# --- parameters and rules files --------------------------------------------------------------

def test_params_are_strict() -> None:
    with pytest.raises(ValidationError):
        FilterParams(min_chars=10, max_chars=10)
    with pytest.raises(ValidationError):
        FilterParams(unknown=1)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        FilterParams(min_cjk_ratio=1.5)
    params = FilterParams()
    with pytest.raises(ValidationError):
        params.min_chars = 3


@pytest.mark.parametrize("version", ["v1", "v2", "v3"])
def test_shipped_rules_load(version: str) -> None:
    rules = load_rules(default_rules_path(version), version)
    assert rules.kinds == ("code", "translation", "editing", "chitchat", "other_task",
                           "poem_only", "fiction", "professional_document")


# --- issue 15: false drops, leaks, traditional characters -------------------------------------

@pytest.mark.parametrize("text", [
    "写一篇演讲稿，在班会上发言",  # v1: professional_document (班会)
    "读了上述材料，你有什么感悟？",  # v1: other_task (a bare question)
    "阅读下面的材料：有人说，失败是成功之母。读了上述材料，你有什么感想？",
])
def test_issue15_false_drops_are_kept(text: str) -> None:
    row = _row(text)
    assert row["decision"] == Decision.KEPT.value, row["detail"]
    assert _reason(text, rules_version="v1") is not None  # what v1 did


@pytest.mark.parametrize("text", [
    "召开班会的流程设计", "写一份家长会主持稿",  # the teacher's documents still are
    "读了上面这段文字，作者想表达什么？",  # a reading question, not a personal response
])
def test_issue15_fixes_stay_narrow(text: str) -> None:
    assert _reason(text) is not None


@pytest.mark.parametrize(("text", "evidence"), [
    ("写十条关于诚信的评论，每条10个字", "写十条关于诚信的评论"),
    ("帮我写10句10个字以内的毕业赠言", "写10句10个字以内的毕业赠言"),
    ("写一段100字的学生评价", "100字"),
    ("帮我写一个100字左右的自我介绍", "100字左右"),
    ("给同学写一段留言，不超过80字", "不超过80字"),
])
def test_issue15_short_non_essay_writing_is_filtered_with_a_reason(text: str,
                                                                   evidence: str) -> None:
    row = _row(text)
    assert row["reason"] == "not_essay:short_text", row["detail"]
    assert f"「{evidence}」" in row["detail"] and "beats weak cue" in row["detail"]
    # the leak: the wording rules alone keep it on the bare N字 cue
    assert load_rules(default_rules_path("v1"), "v1").classify_request(text).reason is None


def test_issue15_ten_ten_character_comments_are_not_essays() -> None:
    # 评语 is a teacher's document already (professional_document); 评论 is not, and is
    # caught as a list of short pieces
    assert _reason("帮我写10条10个字的评语") == "not_essay:professional_document"
    assert _reason("帮我写10条10个字的评论") == "not_essay:short_text"


@pytest.mark.parametrize("text", [
    "写一篇100字的记叙文",  # a genre is named: a (short) essay
    "写一篇200字左右的短文，描写秋天",  # at the threshold or above
    "写一篇文章，列出三条理由说明为什么要读书",  # one essay listing reasons
    "写一篇600字的文章，并拟一个10字以内的标题",  # a title's length is not the body's
    "不少于800字，并附50字以内的摘要，题目自拟",
])
def test_issue15_short_rule_keeps_essays(text: str) -> None:
    row = _row(text)
    assert row["decision"] == Decision.KEPT.value, row["detail"]


def test_short_text_check_can_be_switched_off() -> None:
    assert _reason("写一段100字的学生评价", short_max_chars=0) is None
    assert _reason("写十条关于诚信的评论，每条10个字", short_max_chars=0) is None
    assert _reason("写一段100字的学生评价", short_max_chars=100) is None  # 110 allowed


def test_traditional_characters_match_but_the_text_is_kept() -> None:
    row = _row("寫一篇記敘文，題目自擬，不少於八百字")
    assert row["decision"] == Decision.KEPT.value
    assert row["text"] == "寫一篇記敘文，題目自擬，不少於八百字"  # never converted
    assert row["detail"] == "genre cue 「記敘文」"  # quoted as written
    assert _row("請用Python寫一個排序函數")["reason"] == "not_essay:code"
    assert _row("幫我寫一份年終工作總結")["reason"] == "not_essay:professional_document"


def test_custom_rules_path(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(
        "version: v9\ndescription: test\noffensive:\n  terms: [坏词]\n"
        "essay_cues:\n  genre: ['作文']\n  weak: ['文章']\n"
        "not_essay:\n  - kind: recipe\n    strong: ['菜谱']\n", encoding="utf-8")
    out = _run(["写一篇作文谈谈菜谱", "写一篇文章介绍菜谱", "写一篇文章，坏词连篇"],
               rules_path=str(path))
    assert out["reason"].to_list() == [None, "not_essay:recipe", "offensive"]


@pytest.mark.parametrize("body,match", [
    ("version: v1\ndescription: x\noffensive: {terms: [a]}\n"
     "essay_cues: {genre: ['a'], weak: ['b']}\nnot_essay: [{kind: x, strong: ['(']}]\n",
     "bad regular expression"),
    ("version: v1\ndescription: x\noffensive: {terms: [a]}\n"
     "essay_cues: {genre: ['a'], weak: ['b']}\nnot_essay: [{kind: x, strong: ['a']}]\nextra: 1\n",
     "extra"),
    ("version: v1\ndescription: x\noffensive: {terms: [a]}\n"
     "essay_cues: {genre: ['(?i)a'], weak: ['b']}\nnot_essay: [{kind: x}]\n",
     "inline global flags"),
])
def test_invalid_rules_are_rejected(tmp_path: Path, body: str, match: str) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(FilterRulesError, match=match):
        load_rules(path)


def test_rules_version_must_match_the_file() -> None:
    with pytest.raises(FilterRulesError, match="expected 'v2'"):
        load_rules(default_rules_path("v1"), "v2")
    with pytest.raises(FilterRulesError, match="not found"):
        FilterParams(rules_version="v99").load_rules()


# --- real data -------------------------------------------------------------------------------

NON_ESSAY_DOMAINS_EXCLUDED = ("Literature & Arts", "Education")
# Genuine school-essay prompts among the 296, keyed by (source file stem, index):
# the file's index values repeat across its two source files.
SCHOOL_ESSAYS = {
    ("length_subset", 387): "读后感 of 《百年孤独》 with a word count: a reading-response essay",
    ("style_subset_C", 479): "the same 读后感 prompt, from the other source file",
    ("style_subset_C", 480): "读后感 of 《挪威的森林》 (asks for 论文 format, still a 读后感)",
    ("length_subset", 794): "抒情散文 describing a roadside noodle shop: a descriptive essay",
}
# An argumentative 评论文章 (论点鲜明, 引言/本论/结论) followed by ~3,000 characters of
# reference data: an essay prompt that the default max_chars drops.
LONG_ESSAY = ("style_subset_C", 951)


def _writingbench() -> tuple[list[dict[str, Any]], pl.DataFrame]:
    if not WRITINGBENCH.is_file():
        pytest.skip(f"../shared/data not present: {WRITINGBENCH}")
    rows = [json.loads(line) for line in WRITINGBENCH.read_text(encoding="utf-8").splitlines()]
    return rows, pl.DataFrame({"raw_text": [r["query"] for r in rows]})


def _key(row: dict[str, Any]) -> tuple[str, int]:
    return Path(row["source_path"]).stem, int(row["index"])


def _professional_share(rows: list[dict[str, Any]], table: pl.DataFrame) -> float:
    decisions = [d for r, d in zip(rows, table["decision"], strict=True)
                 if r["domain1"] not in NON_ESSAY_DOMAINS_EXCLUDED]
    return float(sum(d == Decision.FILTERED.value for d in decisions) / len(decisions))


def test_writingbench_confusion_and_school_essays() -> None:
    rows, raw = _writingbench()
    assert len(rows) == 296
    table = run_filter(raw, FilterParams()).table
    confusion: dict[str, Counter[str]] = defaultdict(Counter)
    for r, reason in zip(rows, table["reason"], strict=True):
        confusion[r["domain1"]][reason or "kept"] += 1
    print("\nWritingBench filter confusion (domain1 → reason counts):")
    for domain, counts in sorted(confusion.items()):
        print(f"  {domain}: {dict(counts.most_common())}")
    # Measured 199/202 (0.985): the 3 kept are a travelogue, an investing 科普文 and a
    # case-study request with a weak cue. 0.9 leaves room for ~10 regressions.
    share = _professional_share(rows, table)
    print(f"  professional rows filtered: {share:.3f}")
    assert share >= 0.9
    by_key = {_key(r): d for r, d in zip(rows, table.iter_rows(named=True), strict=True)}
    for key, why in SCHOOL_ESSAYS.items():
        assert by_key[key]["decision"] == Decision.KEPT.value, (key, why, by_key[key]["detail"])
    assert by_key[LONG_ESSAY]["reason"] == "too_long"


@pytest.mark.slow  # ~3 s: 26k-character queries through every pattern
def test_writingbench_wording_rules_alone() -> None:
    # Without the length cap the wording rules must still do the job, and the long
    # argumentative prompt survives once its attached data is admitted.
    rows, raw = _writingbench()
    table = run_filter(raw, FilterParams(max_chars=30_000)).table
    assert "too_long" not in set(table["reason"].drop_nulls())
    share = _professional_share(rows, table)  # measured 0.960
    assert share >= 0.9
    by_key = {_key(r): d for r, d in zip(rows, table["decision"], strict=True)}
    for key in [*SCHOOL_ESSAYS, LONG_ESSAY]:
        assert by_key[key] == Decision.KEPT.value, key


def test_writingpreferencebench_essay_tags_survive() -> None:
    if not PREFERENCE.is_file():
        pytest.skip(f"../shared/data not present: {PREFERENCE}")
    rows = [json.loads(line) for line in PREFERENCE.read_text(encoding="utf-8").splitlines()]
    table = run_filter(pl.DataFrame({"raw_text": [r["prompt"] for r in rows]}),
                       FilterParams()).table
    by_tag: dict[str, list[str | None]] = defaultdict(list)
    for r, reason in zip(rows, table["reason"], strict=True):
        by_tag[r["__internal_tags__"][0]].append(reason)
    for tag in ("议论文", "散文", "演讲稿"):
        assert by_tag[tag] == [None] * 4, (tag, by_tag[tag])
    assert by_tag["诗歌"] == ["not_essay:poem_only"] * 4
    fiction = [r for t in ("仙侠小说", "武侠小说", "军事小说", "科幻故事", "体育小说")
               for r in by_tag[t]]
    assert sum(r == "not_essay:fiction" for r in fiction) >= 0.8 * len(fiction)


# The project's own sample (data/raw), labelled in data/README.md: which raw entries
# are noise the heuristic filter must drop. Chatbot turns are "N" (line) or "N#k"
# (user message at index k); the other files use their ids / item numbers.
SAMPLE_NOISE = {
    "chatbot_logs": (
        "4 35 38#0 70 101 140 10 39 78 92#2 127 2 7#0 13 23 48 68 76#0 76#2 90 109 150 153#0 "
        "164 8 19 30 41 50 55#0 55#2 67 74 86 93 104 110 115 122 133 146 151#2 159 165 26 58 "
        "85#2 107 120 166 21 61 112 141#0 167 14 43 96 111#2 138 169 79 16 53 89 131 40 75 124 "
        "32 46#0 64 71 81 99 119 125#2 136#2 143 154 161 163 7#4 17#2 28#2 63#2 63#4 69#2 "
        "98#2 100#2 106#2 132#2 148#2 156#2"),
    "exam_csv": "ex-004 ex-012 ex-019 ex-026 ex-037 ex-046 ex-055 ex-061 ex-068 ex-073",
    "exam_booklet": "31 32 33 34 35 36",
    "mock_exam": "1 2 3 4 5",
}
SAMPLE_REASONS = {"16": "personal_data", "53": "personal_data", "89": "personal_data",
                  "131": "personal_data", "40": "offensive", "75": "offensive",
                  "124": "offensive", "79": "too_long", "21": "not_chinese"}


def _sample_key(row: dict[str, Any]) -> tuple[str, str]:
    source, locator = row["source"], row["locator"]
    if source == "chatbot_logs":
        m = re.fullmatch(r"line (\d+)(?: turn (\d+))?", locator)
        assert m, locator
        return source, m.group(1) + (f"#{int(m.group(2)) - 1}" if m.group(2) else "")
    if source == "exam_csv":
        return source, row["source_ref"]
    m = re.match(r"item (\d+)", locator)
    assert m, locator
    return source, m.group(1)


def test_project_sample_essays_kept_and_noise_dropped() -> None:
    sources = resource("data") / "sources.yaml"
    if not sources.is_file():
        pytest.skip(f"project sample not present: {sources}")
    collected = kept_rows(run_collect(load_sources(sources)).table)
    # The sample's labels drop a request that held personal data (configs/curate.yaml:
    # deid mode drop); collect masked it already.
    table = run_filter(collected, FilterParams(), drop_personal_data=True).table
    noise = {(src, k) for src, keys in SAMPLE_NOISE.items() for k in keys.split()}
    essays_kept = essays = noise_dropped = noise_rows = 0
    for row in table.iter_rows(named=True):
        key = _sample_key(row)
        kept = row["decision"] == Decision.KEPT.value
        if key in noise:
            noise_rows += 1
            noise_dropped += not kept
        elif row["text"]:  # ex-064 is an empty CSV cell the collector let through
            essays += 1
            essays_kept += kept
        if key[0] == "chatbot_logs" and key[1] in SAMPLE_REASONS:
            assert row["reason"] == SAMPLE_REASONS[key[1]], (key, row["detail"])
    # Measured 218/218 and 115/115 — on the sample the rules were checked against, so
    # these bounds guard against regressions rather than promise recall elsewhere.
    assert essays == 218 and noise_rows == 115
    assert essays_kept >= 0.95 * essays
    assert noise_dropped >= 0.95 * noise_rows


def test_markup_is_stripped_and_noted_or_filtered_when_nothing_is_left() -> None:
    out = _run(["以“门”为题写一篇记叙文，不少于600字。<script>alert(1)</script>",
                "\x1b[31m<b>hi</b>\x1b[0m", "以“桥”为题写一篇议论文。"])
    kept, empty, plain = out.iter_rows(named=True)
    assert kept["decision"] == "kept" and kept["text"] == "以“门”为题写一篇记叙文，不少于600字。"
    assert kept["detail"].endswith("; markup stripped: html:script")
    assert (empty["reason"], empty["text"]) == ("too_short", "hi")
    assert empty["detail"].endswith("; markup stripped: ansi, html")
    assert "markup" not in plain["detail"]


def test_batches_decide_every_row_as_one_batch() -> None:
    texts: list[str | None] = [None, "", "写一篇关于春天的作文，不少于600字。",
                               "帮我写一份年终工作总结", "ｈｅｌｌｏ　ｗｏｒｌｄ", "写作文",
                               "以“我的老师”为题，写一篇记叙文。\r\n\r\n字数不少于500字。",
                               "用Python写一个快速排序", "写一首关于秋天的七言绝句"] * 3
    table = pl.DataFrame({"record_id": [f"r{i}" for i in range(len(texts))], "raw_text": texts,
                          "pii": [None, "phone"] * 13 + [None]},
                         schema={"record_id": pl.Utf8, "raw_text": pl.Utf8, "pii": pl.Utf8})
    whole = run_filter(table, FilterParams(), drop_personal_data=True)
    assert whole.meta["kept"] >= 2 and len(whole.meta["reasons"]) >= 4
    for size in (1, 4, 27, 100):
        batched = run_filter(table, FilterParams(), drop_personal_data=True, batch_rows=size)
        assert batched.table.equals(whole.table)
        assert batched.meta == whole.meta
    empty = run_filter(table.clear(), FilterParams(), batch_rows=4)
    assert empty.table.height == 0 and empty.meta["rows"] == 0


# --- issue 29: a word inside quoted material drives no drop (rules v3) --------------------

@pytest.mark.parametrize("text", [
    "下面是一副对联：“海纳百川，有容乃大；壁立千仞，无欲则刚。”\n请根据这副对联的意思，"
    "扩写成一篇议论性文章，不少于800字。",
    "爷爷常说：“做人要像一副对联，上联是勤，下联是俭。”\n请由这句话出发，写一篇文章，"
    "不少于800字。",
    "老师在黑板上写了一首诗：“谁言寸草心，报得三春晖。”\n请由此写一篇记叙性的文章，讲讲你和"
    "母亲的故事。",
])
def test_quoted_material_or_a_genre_phrase_keeps_an_essay_request(text: str) -> None:
    row = _row(text)
    assert row["decision"] == Decision.KEPT.value, row["detail"]
    assert _reason(text, rules_version="v2") == "not_essay:poem_only"  # what v2 did


@pytest.mark.parametrize("text", ["写一首关于“春天”的七言绝句", "帮我写一副“福”字春联",
                                  "请为“春天”这个题目写一首现代诗"])
def test_a_poem_request_quoting_its_topic_is_still_a_poem(text: str) -> None:
    assert _reason(text) == "not_essay:poem_only"


def test_remembered_texts_give_the_same_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    # The filter decides each distinct raw text once; with the memo cleared at every row
    # the rows (text, id, decision, reason, detail) and counts must be the same.
    import essaybench.core.text_memo as text_memo

    texts = [None, "", "写一篇关于春天的作文，不少于600字。", "帮我写一份年终工作总结",
             "<b>写一篇</b>关于秋天的作文，不少于600字。", "你好", "写十条评语"] * 3
    table = pl.DataFrame({"record_id": [f"r{i}" for i in range(len(texts))], "raw_text": texts,
                          "pii": [None, None, "phone", *[None] * (len(texts) - 3)]},
                         schema={"record_id": pl.Utf8, "raw_text": pl.Utf8, "pii": pl.Utf8})
    remembered = run_filter(table, FilterParams(), drop_personal_data=True)
    monkeypatch.setattr(text_memo, "MAX_ENTRIES", 1)
    fresh = run_filter(table, FilterParams(), drop_personal_data=True)
    assert fresh.table.equals(remembered.table) and fresh.meta == remembered.meta
    assert remembered.table["reason"][2] == "personal_data"
    assert remembered.table["reason"][9] is None  # the same text without personal data
    assert "markup stripped" in remembered.table["detail"][4]
