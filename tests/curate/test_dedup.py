"""Dedup stage: exact duplicates, near duplicates within K-means blocks, small inputs, meta."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import polars as pl
import pytest
from pydantic import ValidationError

from essaybench.core.contracts import Decision, StageOutput
from essaybench.core.hashing import prompt_id
from essaybench.curate.blocking import blocks
from essaybench.curate.dedup import (
    DedupParams,
    Pairs,
    candidate_pairs,
    greedy_keep,
    number_key,
    quoted_spans,
    run_dedup,
    sweep_ks,
    tfidf,
    topic_matrix,
)
from essaybench.curate.elbow import ELBOW_RULE, choose_elbow

# Distinct essay prompts: no two of them are the same request. Several share template wording
# (same frame, different topic) on purpose: they must all survive.
DISTINCT = [
    "写一篇800字的议论文，题目是《论诚信》。",
    "写一篇800字的议论文，题目是《论勤奋》。",
    "写一篇800字的议论文，题目是《谈坚持的意义》。",
    "以“责任”为话题，写一篇不少于800字的议论文，自选角度，自拟标题。",
    "以“梦想”为话题，写一篇不少于800字的议论文，自选角度，自拟标题。",
    "以“规则与自由”为话题，写一篇不少于800字的议论文，自选角度，自拟标题，不得套作。",
    "请以“我的母亲”为题写一篇记叙文，要求叙事完整，有细节描写，不少于600字。",
    "请以“那一次，我真的长大了”为题写一篇记叙文，要求叙事完整，有细节描写，不少于600字。",
    "请以“难忘的一堂课”为题，写一篇600字左右的记叙文，写出真情实感。",
    "写一篇记叙文，讲述你和爷爷一起在乡下过暑假的经历，字数不少于700字。",
    "描写一下秋天的校园，写一篇500字左右的描写文，要运用比喻和拟人的修辞手法。",
    "请写一篇描写家乡春节的散文，突出年味和人情，800字左右。",
    "写一篇写景作文，描写雨后的西湖，要调动视觉、听觉、嗅觉等多种感官。",
    "描写你熟悉的一位老师的外貌和神态，写一篇400字的人物描写短文。",
    "写一篇说明文，介绍大熊猫的生活习性，要求条理清晰，使用列数字、举例子等说明方法。",
    "请写一篇介绍二十四节气的说明文，字数在1000字以内，面向小学生。",
    "写一篇说明文，说明智能手机是如何改变我们的生活的，不少于800字。",
    "介绍一种你熟悉的传统美食的制作过程，写成一篇说明文，600字左右。",
    "阅读下面的材料，根据要求写作。有人说，“躺平”是对内卷的无声反抗；也有人说，“躺平”是逃避"
    "责任。请结合材料写一篇文章，谈谈你的看法。要求：选准角度，确定立意，明确文体，自拟标题；"
    "不要套作，不得抄袭；不少于800字。",
    "阅读下面的材料，根据要求写作。人工智能可以写诗、作画、编程，有人担心它会让人类变得懒惰，"
    "也有人认为它能解放人的创造力。请结合材料写一篇文章，体现你的感悟与思考。要求：选准角度，"
    "确定立意，明确文体，自拟标题；不要套作，不得抄袭；不少于800字。",
    "以“光”为题写一篇作文，文体不限（诗歌除外），不少于800字。",
    "以“远方”为题写一篇作文，文体不限（诗歌除外），不少于800字。",
    "帮我写一篇关于环境保护的演讲稿，面向初中生，时长大约五分钟。",
    "写一篇读后感，谈谈你读《平凡的世界》之后的感受，800字左右。",
    "写一篇《红楼梦》的读书笔记，重点分析林黛玉的人物形象。",
    "请围绕“科技让生活更美好”写一篇议论文，要有明确的论点和至少两个论据。",
    "以“挫折是成长的阶梯”为论点，写一篇议论文，运用举例论证和对比论证。",
    "写一篇关于网络语言是否会破坏汉语纯洁性的议论文，观点鲜明，不少于1000字。",
    "想象一下一百年后的城市是什么样子，写一篇科幻小故事，不少于800字。",
    "写一则寓言故事，通过小动物的经历说明“骄傲使人落后”的道理。",
    "给十年后的自己写一封信，谈谈现在的困惑和对未来的期待。",
    "写一篇游记，记录你去黄山旅游的见闻和感受，要写出景物的特点。",
    "请以“家乡的变化”为主题写一篇作文，对比过去和现在，表达对家乡的热爱。",
    "写一篇关于“劳动教育”的议论文，结合校园生活谈谈劳动的价值。",
    "以“窗”为题，写一篇散文，借物抒情，不少于600字。",
    "写一篇介绍故宫建筑特点的说明文，按照空间顺序进行说明。",
]

# (prompt in DISTINCT, a rewording of it): the same request in other words. Each must be dropped
# as a near duplicate of its original.
REWORDINGS = [
    ("写一篇800字的议论文，题目是《论诚信》。", "请写一篇八百字的议论文，题目为《论诚信》"),
    ("以“责任”为话题，写一篇不少于800字的议论文，自选角度，自拟标题。",
     "以“责任”为话题写一篇议论文，不少于800字，角度自选，标题自拟。"),
    ("请以“我的母亲”为题写一篇记叙文，要求叙事完整，有细节描写，不少于600字。",
     "以“我的母亲”为题，写一篇不少于600字的记叙文，要求叙事完整、有细节描写。"),
    ("写一篇说明文，介绍大熊猫的生活习性，要求条理清晰，使用列数字、举例子等说明方法。",
     "请写一篇介绍大熊猫生活习性的说明文，条理要清晰，要用到列数字、举例子等说明方法。"),
    ("描写一下秋天的校园，写一篇500字左右的描写文，要运用比喻和拟人的修辞手法。",
     "写一篇500字左右的描写文，描写秋天的校园，要求运用比喻、拟人等修辞手法。"),
    ("帮我写一篇关于环境保护的演讲稿，面向初中生，时长大约五分钟。",
     "帮我写一篇环境保护主题的演讲稿，听众是初中生，大概五分钟。"),
    ("写一篇读后感，谈谈你读《平凡的世界》之后的感受，800字左右。",
     "读完《平凡的世界》，写一篇800字左右的读后感，谈谈你的感受。"),
    ("以“光”为题写一篇作文，文体不限（诗歌除外），不少于800字。",
     "以“光”为题目写一篇作文，除诗歌外文体不限，字数不少于800。"),
    ("写一篇游记，记录你去黄山旅游的见闻和感受，要写出景物的特点。",
     "请写一篇黄山游记，记录你旅游时的见闻和感受，写出景物的特点。"),
    ("写一则寓言故事，通过小动物的经历说明“骄傲使人落后”的道理。",
     "写一个寓言故事，借小动物的经历讲明“骄傲使人落后”这个道理。"),
    ("请写一篇介绍二十四节气的说明文，字数在1000字以内，面向小学生。",
     "写一篇面向小学生的说明文，介绍二十四节气，1000字以内。"),
    ("以“窗”为题，写一篇散文，借物抒情，不少于600字。",
     "以“窗”为题目，写一篇借物抒情的散文，600字以上。"),
    ("请以“那一次，我真的长大了”为题写一篇记叙文，要求叙事完整，有细节描写，不少于600字。",
     "以“那一次，我真的长大了”为题目写一篇不少于600字的记叙文，叙事要完整，要有细节描写。"),
    ("写一篇关于网络语言是否会破坏汉语纯洁性的议论文，观点鲜明，不少于1000字。",
     "网络语言会不会破坏汉语的纯洁性？请写一篇观点鲜明的议论文，不少于1000字。"),
    ("给十年后的自己写一封信，谈谈现在的困惑和对未来的期待。",
     "请给十年后的自己写一封信，说说你现在的困惑，以及对未来的期待。"),
]

# Pairs in DISTINCT built on one template with a different quoted topic.
TEMPLATE_TWINS = [
    ("写一篇800字的议论文，题目是《论诚信》。", "写一篇800字的议论文，题目是《论勤奋》。"),
    ("以“责任”为话题，写一篇不少于800字的议论文，自选角度，自拟标题。",
     "以“梦想”为话题，写一篇不少于800字的议论文，自选角度，自拟标题。"),
    ("以“光”为题写一篇作文，文体不限（诗歌除外），不少于800字。",
     "以“远方”为题写一篇作文，文体不限（诗歌除外），不少于800字。"),
]


def _table(texts: list[str], **extra: list[Any]) -> pl.DataFrame:
    return pl.DataFrame({
        "record_id": [f"r{i}" for i in range(len(texts))],
        "text": texts,
        "prompt_id": [prompt_id(t) for t in texts],
        "decision": [Decision.KEPT.value] * len(texts),
        **extra,
    }, schema_overrides={"text": pl.Utf8, "prompt_id": pl.Utf8, "decision": pl.Utf8})


def _corpus() -> list[str]:
    return DISTINCT + [b for _, b in REWORDINGS]


def _rows(out: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """Row by text; for a text that occurs twice, its first occurrence."""
    rows: dict[str, dict[str, Any]] = {}
    for row in out.iter_rows(named=True):
        rows.setdefault(row["text"], row)
    return rows


def _corpus_table() -> pl.DataFrame:
    """The calibration set plus one exact duplicate, with columns an upstream stage left."""
    texts = [*_corpus(), DISTINCT[1]]
    n = len(texts)
    return _table(texts, source=["s"] * n, detail=["from filter"] * n, reason=[None] * n)


@pytest.fixture(scope="module")
def corpus_result() -> StageOutput:
    # One run with default params shared by the read-only tests below (keeps the file fast).
    return run_dedup(_corpus_table(), DedupParams())


# --- the calibration set itself -----------------------------------------------------------

def test_calibration_set_is_what_it_claims() -> None:
    assert 30 <= len(_corpus()) <= 60
    assert len(set(_corpus())) == len(_corpus())
    assert {a for a, _ in REWORDINGS} <= set(DISTINCT)
    assert {t for pair in TEMPLATE_TWINS for t in pair} <= set(DISTINCT)


def test_template_twins_score_above_rewordings_so_cosine_alone_cannot_separate_them() -> None:
    # The measurement behind the quoted-topic guard (see dedup's module docstring).
    texts = _corpus()
    x = tfidf(texts, DedupParams())
    index = {t: i for i, t in enumerate(texts)}

    def cos(a: str, b: str) -> float:
        return float((x[index[a]] @ x[index[b]].T).toarray()[0, 0])

    rewording = [cos(a, b) for a, b in REWORDINGS]
    twins = [cos(a, b) for a, b in TEMPLATE_TWINS]
    assert min(rewording) >= DedupParams().near_dup_threshold
    assert max(twins) > min(rewording)


# --- exact duplicates ---------------------------------------------------------------------

def test_exact_duplicates_point_at_the_first_occurrence() -> None:
    a, b = DISTINCT[0], DISTINCT[14]
    out = run_dedup(_table([a, b, a, a, b]), DedupParams()).table
    assert out["decision"].to_list() == ["kept", "kept", "duplicate", "duplicate", "duplicate"]
    assert out["reason"].to_list() == [None, None, "exact_duplicate", "exact_duplicate",
                                       "exact_duplicate"]
    assert out["duplicate_of"].to_list() == [None, None, prompt_id(a), prompt_id(a), prompt_id(b)]
    assert out["similarity"].to_list() == [None, None, 1.0, 1.0, 1.0]
    assert out["detail"][2] == "same prompt_id as row 0"
    assert out["detail"][4] == "same prompt_id as row 1"


def test_all_rows_identical() -> None:
    out = run_dedup(_table([DISTINCT[3]] * 6), DedupParams())
    assert out.counts() == {"kept": 1, "duplicate": 5}
    assert out.meta["exact_duplicates"] == 5 and out.meta["near_duplicates"] == 0
    assert out.meta["n_unique"] == 1 and out.meta["chosen_k"] == 1


# --- near duplicates ----------------------------------------------------------------------

def test_rewordings_dropped_and_every_distinct_prompt_kept(corpus_result: StageOutput) -> None:
    rows = _rows(corpus_result.table)
    for text in DISTINCT:
        assert rows[text]["decision"] == "kept", text
    for original, rewording in REWORDINGS:
        row = rows[rewording]
        assert row["decision"] == "duplicate", rewording
        assert row["reason"] == "near_duplicate"
        assert row["duplicate_of"] == prompt_id(original)
        assert DedupParams().near_dup_threshold <= row["similarity"] < 1.0
        assert f"cosine {row['similarity']:.3f}" in row["detail"]
    assert corpus_result.meta["near_duplicates"] == len(REWORDINGS)
    assert corpus_result.meta["pairs_vetoed_by_topic_guard"] >= len(TEMPLATE_TWINS)


def test_similarity_is_the_tfidf_cosine_of_the_pair(corpus_result: StageOutput) -> None:
    texts = corpus_result.table["text"].to_list()
    x = tfidf(list(dict.fromkeys(texts)), DedupParams())  # the unique texts, as the stage saw them
    rows = _rows(corpus_result.table)
    for original, rewording in REWORDINGS:
        i, j = texts.index(original), texts.index(rewording)
        expected = float((x[i] @ x[j].T).toarray()[0, 0])
        assert rows[rewording]["similarity"] == pytest.approx(expected, abs=1e-12)


def test_without_the_topic_guard_template_twins_are_dropped() -> None:
    out = run_dedup(_table(_corpus()), DedupParams(quoted_topic_guard=False, k_points=3)).table
    rows = _rows(out)
    for first, second in TEMPLATE_TWINS:
        assert rows[first]["decision"] == "kept"
        assert rows[second]["decision"] == "duplicate"
        assert rows[second]["duplicate_of"] == prompt_id(first)


# Distinct requests on one frame: another length (the MinHash pass sees the long pair at
# shingle Jaccard >= 0.7, the K-means pass the short one at cosine >= 0.6).
LENGTH_TWINS = [
    ("帮我写一篇关于环境保护的演讲稿，面向初中生，时长大约五分钟，语言生动，结尾要升华主题，600字左右。",
     "帮我写一篇关于环境保护的演讲稿，面向初中生，时长大约五分钟，语言生动，结尾要升华主题，1200字左右。"),
    ("写一篇关于校园生活的记叙文，不少于600字。", "写一篇不少于1000字的记叙文，关于校园生活。"),
]


def test_prompts_stating_other_numbers_are_never_near_duplicates() -> None:
    texts = [t for pair in LENGTH_TWINS for t in pair] + DISTINCT[9:15]
    guarded = run_dedup(_table(texts), DedupParams(k_points=3)).table
    assert guarded["decision"].to_list() == ["kept"] * len(texts)
    free = run_dedup(_table(texts), DedupParams(k_points=3, number_guard=False)).table
    assert free["reason"].to_list()[:4] == [None, "minhash_duplicate", None, "near_duplicate"]
    # 800字 and 八百字 are left to the similarity: that rewording is still dropped.
    assert number_key(REWORDINGS[0][1]) == "" and number_key(REWORDINGS[0][0]) == "800"
    assert number_key("不少于1,000字，分3段") == "000,1,3"


def test_a_fit_sample_assigns_every_row_and_finds_the_same_duplicates(
        corpus_result: StageOutput) -> None:
    # SVD and the k sweep fitted on 30 of the 51 distinct rows; every row is assigned.
    sampled = run_dedup(_corpus_table(), DedupParams(fit_rows=30))
    assert sampled.meta["chosen_k"] <= 15  # the sweep saw 30 rows: k_max capped at 15
    for column in ("decision", "reason", "duplicate_of"):
        assert sampled.table[column].to_list() == corpus_result.table[column].to_list()


def test_the_later_row_is_dropped_whichever_text_it_is() -> None:
    original, rewording = REWORDINGS[4]
    out = run_dedup(_table([rewording, DISTINCT[20], original]), DedupParams()).table
    assert out["decision"].to_list() == ["kept", "kept", "duplicate"]
    assert out["duplicate_of"][2] == prompt_id(rewording)


def test_threshold_is_respected() -> None:
    original, rewording = REWORDINGS[2]
    texts = [original, rewording, *DISTINCT[20:30]]
    low = run_dedup(_table(texts), DedupParams()).table
    sim = low["similarity"][1]
    assert low["decision"][1] == "duplicate"
    high = run_dedup(_table(texts), DedupParams(near_dup_threshold=min(1.0, sim + 1e-6))).table
    assert high["decision"][1] == "kept"


def _pairs(triples: list[tuple[int, int, float]]) -> Pairs:
    earlier, later, sim = zip(*triples, strict=True)
    return Pairs(np.array(earlier, dtype=np.int64), np.array(later, dtype=np.int64),
                 np.array(sim, dtype=np.float64), compared=0, vetoed=0)


def test_duplicate_of_is_the_most_similar_kept_row_ties_to_the_earlier() -> None:
    # Rows 0 and 1 are both kept (no pair between them); row 2 matches both.
    dup_of, sim = greedy_keep(3, _pairs([(0, 2, 0.7), (1, 2, 0.8)]))
    assert dup_of.tolist() == [-1, -1, 1] and sim[2] == 0.8
    dup_of, _ = greedy_keep(3, _pairs([(1, 2, 0.75), (0, 2, 0.75)]))
    assert dup_of.tolist() == [-1, -1, 0]
    # Row 1 is dropped (duplicate of 0), so row 2 must point at 0 even though 1 is closer.
    dup_of, sim = greedy_keep(3, _pairs([(0, 1, 0.9), (1, 2, 0.95), (0, 2, 0.65)]))
    assert dup_of.tolist() == [-1, 0, 0] and sim[2] == 0.65


def test_chains_never_point_at_a_dropped_row() -> None:
    texts = _corpus() + [f"请{b}" for _, b in REWORDINGS]
    out = run_dedup(_table(texts), DedupParams(k_points=3)).table
    kept = set(out.filter(pl.col("decision") == "kept")["prompt_id"])
    pointed = set(out.filter(pl.col("reason") == "near_duplicate")["duplicate_of"])
    assert pointed <= kept


# --- pieces -------------------------------------------------------------------------------

def test_quoted_spans() -> None:
    assert quoted_spans("以“责任”为话题，读《红楼梦》「甲」『乙』\"丙\"") == {
        "责任", "红楼梦", "甲", "乙", "丙"}
    assert quoted_spans("写一篇说明文，介绍大熊猫") == frozenset()
    m = topic_matrix(["以“责任”为话题", "无引号", "“责任”与“担当”"]).toarray()
    assert m.sum(axis=1).tolist() == [1.0, 0.0, 2.0]
    assert (m[0] * m[2]).sum() == 1.0


def test_topic_guard_vetoes_only_pairs_quoting_disjoint_topics() -> None:
    texts = ["以“责任”为话题写一篇议论文", "以“梦想”为话题写一篇议论文",  # disjoint: vetoed
             "以“责任”与“担当”为话题写一篇议论文",  # shares 责任 with row 0
             "以责任为话题写一篇议论文"]  # quotes nothing: left to the cosine
    x = tfidf(texts, DedupParams())
    everything = [np.arange(4)]
    free = candidate_pairs(x, everything, 0.3, None)
    guarded = candidate_pairs(x, everything, 0.3, topic_matrix(texts))
    pairs = set(zip(free.earlier.tolist(), free.later.tolist(), strict=True))
    kept = set(zip(guarded.earlier.tolist(), guarded.later.tolist(), strict=True))
    assert {(0, 1), (1, 2), (0, 2), (0, 3), (1, 3), (2, 3)} <= pairs
    assert pairs - kept == {(0, 1), (1, 2)}
    assert guarded.vetoed == 2 and free.vetoed == 0


def test_blocks_put_a_row_in_its_nearest_clusters() -> None:
    distances = np.array([[0.1, 0.5, 0.9], [0.8, 0.2, 0.3], [0.4, 0.6, 0.05]])
    assert [b.tolist() for b in blocks(distances, 1)] == [[0], [1], [2]]
    assert [b.tolist() for b in blocks(distances, 2)] == [[0, 2], [0, 1], [1, 2]]
    assert [b.tolist() for b in blocks(distances, 5)] == [[0, 1, 2]] * 3


def test_pairs_only_within_blocks_and_counted_once() -> None:
    texts = [REWORDINGS[0][0], REWORDINGS[0][1], REWORDINGS[3][0], REWORDINGS[3][1]]
    x = tfidf(texts, DedupParams())
    together = candidate_pairs(x, [np.array([0, 1, 2, 3])] * 2, 0.5, None)
    assert list(zip(together.earlier.tolist(), together.later.tolist(), strict=True)) == [
        (0, 1), (2, 3)]
    assert together.compared == 12
    apart = candidate_pairs(x, [np.array([0, 2]), np.array([1, 3])], 0.5, None)
    assert apart.earlier.size == 0 and apart.compared == 2


def test_greedy_keeps_the_earlier_and_skips_dropped_rows() -> None:
    x = tfidf(["甲乙丙丁", "甲乙丙丁戊", "甲乙丙丁戊己"], DedupParams())
    pairs = candidate_pairs(x, [np.arange(3)], 0.1, None)
    dup_of, sim = greedy_keep(3, pairs)
    assert dup_of.tolist() == [-1, 0, 0]  # row 1 is dropped, so row 2 cannot point at it
    assert sim[2] == pytest.approx(float((x[0] @ x[2].T).toarray()[0, 0]))


def test_sweep_ks_caps_for_small_inputs() -> None:
    p = DedupParams(k_min=2, k_max=200, k_points=10)
    assert sweep_ks(1000, p) == [2, 24, 46, 68, 90, 112, 134, 156, 178, 200]
    assert sweep_ks(10, p) == [2, 3, 4, 5]
    assert sweep_ks(3, p) == [1]
    assert sweep_ks(0, p) == [1]
    assert sweep_ks(1000, DedupParams(k_min=5, k_max=50, k_points=1)) == [5]


def test_params_reject_bad_values() -> None:
    with pytest.raises(ValidationError):
        DedupParams(ngram_min=3, ngram_max=2)
    with pytest.raises(ValidationError):
        DedupParams(k_min=10, k_max=5)
    with pytest.raises(ValidationError):
        DedupParams(near_dup_threshold=0.0)
    with pytest.raises(ValidationError):
        DedupParams(bogus=1)  # type: ignore[call-arg]


# --- small and odd inputs -----------------------------------------------------------------

def test_empty_table() -> None:
    result = run_dedup(_table([]), DedupParams())
    assert result.table.height == 0
    assert {"duplicate_of", "similarity", "reason", "detail"} <= set(result.table.columns)
    assert result.meta["ks"] == [] and result.meta["inertias"] == []
    assert result.meta["chosen_k"] == 0
    assert result.meta["exact_duplicates"] == result.meta["near_duplicates"] == 0


@pytest.mark.parametrize(("texts", "expected"), [
    ([DISTINCT[0]], ["kept"]),
    ([DISTINCT[0], DISTINCT[14]], ["kept", "kept"]),
    (list(REWORDINGS[2]), ["kept", "duplicate"]),
])
def test_one_and_two_rows(texts: list[str], expected: list[str]) -> None:
    result = run_dedup(_table(texts), DedupParams())
    assert result.table["decision"].to_list() == expected
    assert result.meta["ks"] == [1] and result.meta["chosen_k"] == 1
    assert len(result.meta["inertias"]) == 1


def test_fewer_rows_than_k_min() -> None:
    texts = DISTINCT[:6]
    result = run_dedup(_table(texts), DedupParams(k_min=10, k_max=50))
    assert result.meta["ks"] == [3] and result.meta["chosen_k"] == 3
    assert result.counts() == {"kept": 6}


def test_texts_with_no_ngram_overlap() -> None:
    texts = ["春", "夏", "秋", "冬", "风花", "雪月"]
    result = run_dedup(_table(texts), DedupParams())
    assert result.counts() == {"kept": 6}
    assert result.meta["near_duplicates"] == 0


def test_texts_shorter_than_every_ngram() -> None:
    texts = ["春", "夏", "秋"]
    result = run_dedup(_table(texts), DedupParams(ngram_min=2, ngram_max=3))
    assert result.counts() == {"kept": 3}
    assert result.meta["n_features"] == 0


# --- contract -----------------------------------------------------------------------------

def test_rows_in_order_and_untouched_columns_pass_through(corpus_result: StageOutput) -> None:
    table, out = _corpus_table(), corpus_result.table
    assert out["record_id"].to_list() == table["record_id"].to_list()
    assert out["source"].to_list() == table["source"].to_list()
    assert out.schema["similarity"] == pl.Float64 and out.schema["duplicate_of"] == pl.Utf8
    kept = out.filter(pl.col("decision") == "kept")
    assert kept["detail"].to_list() == ["from filter"] * kept.height
    assert kept["reason"].null_count() == kept.height
    assert kept["duplicate_of"].null_count() == kept.height
    assert kept["similarity"].null_count() == kept.height


def test_rejects_missing_columns_nulls_and_non_kept_rows() -> None:
    with pytest.raises(ValueError, match="prompt_id"):
        run_dedup(pl.DataFrame({"text": ["写一篇作文"]}), DedupParams())
    with pytest.raises(ValueError, match="null"):
        run_dedup(pl.DataFrame({"text": [None], "prompt_id": ["p1"]},
                               schema={"text": pl.Utf8, "prompt_id": pl.Utf8}), DedupParams())
    bad = _table(DISTINCT[:2]).with_columns(pl.Series("decision", ["kept", "filtered"]))
    with pytest.raises(ValueError, match="kept rows only"):
        run_dedup(bad, DedupParams())


def test_deterministic(corpus_result: StageOutput) -> None:
    again = run_dedup(_corpus_table(), DedupParams())
    assert again.table.equals(corpus_result.table)
    assert ({k: v for k, v in again.meta.items() if k != "seconds"}
            == {k: v for k, v in corpus_result.meta.items() if k != "seconds"})


def test_meta_has_curve_chosen_k_and_counts(corpus_result: StageOutput) -> None:
    meta = corpus_result.meta
    json.dumps(meta)  # storable with the snapshot
    n_input = corpus_result.table.height
    n_unique = n_input - 1
    assert meta["ks"] == sweep_ks(n_unique, DedupParams())
    assert len(meta["ks"]) > 2
    assert len(meta["inertias"]) == len(meta["ks"])
    assert all(isinstance(v, float) and v >= 0 for v in meta["inertias"])
    assert meta["chosen_k"] == choose_elbow(meta["ks"], meta["inertias"])
    assert meta["elbow_rule"] == ELBOW_RULE
    assert meta["cluster_sizes"]["count"] <= meta["chosen_k"]
    assert meta["params"] == DedupParams().model_dump()
    assert meta["n_input"] == n_input and meta["n_unique"] == n_unique
    assert meta["exact_duplicates"] == 1
    assert meta["near_duplicates"] == len(REWORDINGS)
    assert 0 < meta["pairs_compared"] <= (
        n_unique * (n_unique - 1) // 2 * meta["params"]["assign_clusters"])
    assert {"vectorise", "svd", "sweep", "near_dup", "total"} <= set(meta["seconds"])
    counts = corpus_result.counts()
    assert counts[Decision.DUPLICATE.value] == meta["exact_duplicates"] + meta["near_duplicates"]


def test_block_cosines_on_the_blocks_own_columns_equal_the_full_width_product() -> None:
    # _block_pairs multiplies on the n-grams a block uses (dedup's speed at 10^6 records);
    # the map keeps each row's term order, so every cosine must equal, bit for bit, the
    # product over the whole vocabulary it replaced, and so every pair found.
    from benchmarks.dedup_kmeans import make_corpus
    from essaybench.curate.dedup import _block_pairs

    texts = make_corpus(400, seed=4).texts
    x = tfidf(texts, DedupParams())
    rng = np.random.default_rng(0)
    for size, threshold in ((400, 0.6), (257, 0.3), (40, 0.0)):
        members = np.sort(rng.choice(len(texts), size, replace=False))
        xb = x[members]
        full = np.asarray(xb @ xb.toarray().T)  # earlier × later, whole vocabulary
        e, c = np.nonzero((full >= threshold)
                          & (np.arange(size)[:, None] < np.arange(size)[None, :]))
        expected = set(zip(members[e].tolist(), members[c].tolist(), full[e, c].tolist(),
                           strict=True))
        got = {(a, b, s) for ea, ca, sa in _block_pairs(x, members, threshold)
               for a, b, s in zip(ea.tolist(), ca.tolist(), sa.tolist(), strict=True)}
        assert got == expected and len(expected) > 0


def test_pairs_merged_as_they_come_equal_one_merge_at_the_end(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # candidate_pairs merges the copies of pairs met in overlapping blocks every
    # _PAIRS_PENDING keys (its memory at 10^6 records): the same pairs, cosines and counts.
    import essaybench.curate.dedup as dedup_module
    from benchmarks.dedup_kmeans import make_corpus

    texts = make_corpus(400, seed=4).texts
    x = tfidf(texts, DedupParams())
    rng = np.random.default_rng(1)
    row_blocks = [np.sort(rng.choice(len(texts), 150, replace=False)) for _ in range(8)]
    topics = topic_matrix(texts)
    numbers = dedup_module.number_ids(texts)
    whole = candidate_pairs(x, row_blocks, 0.3, topics, numbers)
    monkeypatch.setattr(dedup_module, "_PAIRS_PENDING", 3)
    merged = candidate_pairs(x, row_blocks, 0.3, topics, numbers)
    for name in ("earlier", "later", "sim"):
        assert np.array_equal(getattr(whole, name), getattr(merged, name))
    assert (whole.compared, whole.vetoed) == (merged.compared, merged.vetoed)
    assert whole.earlier.size > 20 and whole.vetoed > 0
