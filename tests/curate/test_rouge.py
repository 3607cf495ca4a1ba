"""The rouge stage: exact rouge-chinese scores, greedy pruning, exact pre-filters."""

from __future__ import annotations

import json
import random
from collections import Counter
from functools import cache
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from pydantic import ValidationError
from rapidfuzz.distance import LCSseq
from rouge_chinese import Rouge

from essaybench.curate.rouge import (
    RougeParams,
    _Occurrences,
    encode_tokens,
    length_window,
    may_collide,
    prune,
    rouge_l_f,
    rouge_l_pair,
    run_rouge,
)
from essaybench.curate.segment import Segmenter, jieba_words, rouge_string, rouge_tokens, rouge_view

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
ROUGE = Rouge()
# Same rouge-l code path without rouge-1/2, for the brute-force comparisons.
ROUGE_L = Rouge(metrics=["rouge-l"])

OPENINGS = ["", "请", "帮我", "老师让我们", "你好，请你", "麻烦", "我想让你"]
TASKS = ["以“{t}”为题写一篇{g}", "写一篇关于{t}的{g}", "围绕“{t}”这个话题写一篇{g}",
         "给我一篇题为《{t}》的{g}", "用{t}作题目写{g}"]
TOPICS = ["我的家乡", "坚持的力量", "科技与生活", "那一刻我长大了", "读书的意义", "诚信",
          "秋天的色彩", "人工智能与未来", "故乡的年味", "规则与自由", "一次难忘的旅行"]
GENRES = ["议论文", "记叙文", "说明文", "散文", "演讲稿", "作文"]
REQS = ["不少于800字", "600字左右", "观点明确，论据充分", "要有真情实感", "自拟标题",
        "不得抄袭", "结构清晰", "运用比喻和排比", "结合自身经历", "语言生动", "字数在1000字以内",
        "引用名人名言", "写出景物特点", "首尾呼应"]
MATERIALS = ["古人云：“读万卷书，行万里路。”", "有人说，人生就像一场马拉松。",
             "2023年，C919正式投入商业运营。", "一位老人坚持捡垃圾十年……网友纷纷点赞！",
             "阅读下面的材料，根据要求写作。", "他说：“走吧。”然后走了。"]
EDITS = [("写一篇", "写一篇优秀的"), ("请", "请你"), ("不少于", "至少"), ("，", "；"),
         ("作文", "文章"), ("800", "1000")]


def make_prompt(rng: random.Random) -> str:
    task = rng.choice(TASKS).format(t=rng.choice(TOPICS), g=rng.choice(GENRES))
    reqs = "，".join(rng.sample(REQS, rng.randint(1, 4)))
    text = f"{rng.choice(OPENINGS)}{task}，{reqs}。"
    return rng.choice(MATERIALS) + text if rng.random() < 0.4 else text


def near_duplicate(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 3)):
        a, b = rng.choice(EDITS)
        text = text.replace(a, b, 1) if a in text else text + rng.choice(REQS) + "。"
    return text


def make_prompts(n: int, seed: int, dup_share: float = 0.4) -> list[str]:
    """Prompts where ``dup_share`` are edits of earlier ones: many near-threshold pairs."""
    rng = random.Random(seed)
    out: list[str] = []
    for _ in range(n):
        out.append(near_duplicate(rng.choice(out), rng) if out and rng.random() < dup_share
                   else make_prompt(rng))
    return out


@cache
def joined(text: str) -> str:
    return rouge_string(text)


@cache
def tokens(text: str) -> list[str]:
    return rouge_tokens(text)


def reference_f(a: str, b: str) -> float:
    """rouge-chinese on the strings the stage stands for (jieba, space-joined)."""
    return float(ROUGE.get_scores(joined(a), joined(b))[0]["rouge-l"]["f"])


def table(texts: list[str], ids: list[str] | None = None) -> pl.DataFrame:
    ids = ids or [f"p{i}" for i in range(len(texts))]
    return pl.DataFrame({"prompt_id": ids, "text": texts, "decision": ["kept"] * len(texts),
                         "source": ["test"] * len(texts)})


SPECIAL = [
    ("请以“科技与生活”为题，写一篇800字的议论文。",
     "请以“科技改变生活”为题，写一篇不少于800字的议论文。"),
    ("写作文？？？好吗?!", "写作文？好吗？？"),
    ("等等......好的abc.......def", "等等.......好的abc......def"),
    ("你好……啊……他说：“走吧。”然后走了。", "你好……他说：“走吧！”然后走了……"),
    ("3.14和v1.2.3 C++ C# 100%", "3.14与v1.2.4 C++ 和 C# 99%"),
    ("Please write an essay about AI in 500 words.", "Please write an essay about AI, 800 words."),
    ("好 好 好 好 好 好", "好 好 坏 好"),
    ("的的的的的。的的", "的。的的的的"),
    ("材料。\n要求：写一篇作文。\n\n不少于800字。", "材料。 要求：写一篇作文。不少于800字。"),
    ("  前后有空格\t和制表符  ", "前后有空格\u3000和全角空格\r\n换行"),
    ("第一段。\n \n第二段！\n第三段？", "第一段。第二段！第三段？"),
    ("“引号里。”外面。‘单引号？’", "“引号里。”外面"),
    ("e.g.这是...一个例子", "例如这是一个例子..."),
    ("www.example.com 邮箱a_b@c.com", "网址www.example.com"),
]


def near_threshold_pairs() -> list[tuple[str, str]]:
    """Pairs built so that F lands just below or just above 0.7."""
    fruit = ["苹果", "香蕉", "橘子", "葡萄", "西瓜", "芒果", "草莓", "樱桃", "菠萝", "柠檬"]
    other = ["土豆", "白菜", "萝卜", "茄子", "黄瓜"]
    return [
        # seven of ten tokens shared: p = r = 0.7 gives F = 0.69999999500..., just below
        ("A B C D E F G H I J", "A B C D E F G X Y Z"),
        ("A B C D E F G H I J", "A B C D E F G X Y"),  # 7 of 10 vs 9: 0.737, above
        ("A B C D E F G H I J K", "A B C D E F G X Y Z"),  # 7 of 11 vs 10: 0.667
        (" ".join(fruit), " ".join(fruit[:7] + other[:3])),  # the same with words
        (" ".join(fruit), " ".join(fruit[:7] + other[:2])),
        ("，".join(fruit[:6]) + "。", "，".join(fruit[:2] + other[:4]) + "。"),  # 8 of 12
        ("，".join(fruit[:6]) + "。", "，".join(fruit[:3] + other[:3]) + "。"),  # 9 of 12
    ]


# --- the scores are rouge-chinese's, bit for bit -------------------------------------------


def test_scores_equal_rouge_chinese_on_random_prompt_pairs() -> None:
    rng = random.Random(7)
    texts = make_prompts(200, seed=3)
    pairs = [(rng.choice(texts), rng.choice(texts)) for _ in range(300)]
    pairs += [(t, near_duplicate(t, rng)) for t in rng.sample(texts, 40)]
    pairs += SPECIAL + near_threshold_pairs()
    seen = set()
    for a, b in pairs:
        ref = reference_f(a, b)
        fast = rouge_l_pair(tokens(a), tokens(b))
        assert fast == ref, (a, b, fast, ref)
        assert rouge_l_pair(tokens(b), tokens(a)) == ref  # symmetric, exactly
        seen.add(ref >= 0.7)
    assert seen == {True, False}


def test_near_threshold_pairs_fall_on_the_right_side() -> None:
    pairs = near_threshold_pairs()
    scores = [reference_f(a, b) for a, b in pairs]
    assert [len(rouge_tokens(a)) for a, _ in pairs[3:5]] == [10, 10]  # jieba kept the words
    assert scores[0] == scores[3] == rouge_l_f(7, 10, 10) < 0.7  # 0.69999999500...
    assert scores[1] == scores[4] == rouge_l_f(7, 10, 9) > 0.7
    assert scores[2] < 0.7
    assert scores[5] < 0.7 <= scores[6]
    assert all(abs(f - 0.7) < 0.1 for f in scores)
    for (a, b), f in zip(pairs, scores, strict=True):
        out = run_rouge(table([a, b]), RougeParams()).table
        assert out["decision"].to_list() == ["kept", "duplicate" if f >= 0.7 else "kept"]


def test_token_view_matches_rouge_chinese_counts_on_awkward_strings() -> None:
    raw = Rouge(metrics=["rouge-l"], raw_results=True)
    awkward = ["好 。 \n 下 \n \n 的", "等等 ....... 好", "a\n \nb", "。。。 ？？", "  x  ",
               "他 说 ： “ 走 吧 。 ” 然后", "…… … ……x", "?! ? ?x", "a\u3000b\xa0c"]
    awkward += [rouge_string(a) for pair in SPECIAL for a in pair]
    for s in awkward:
        counts = raw.get_scores(s, s)[0]["rouge-l"]
        assert len(rouge_view(s)) == counts["hyp"] == counts["overlap"], repr(s)
    assert rouge_view("好 。 \n 下") == ["好", "。", "", "下"]  # rouge-chinese's phantom token
    assert rouge_view("等等 ....... 好") == ["等等", "......", ".", "好"]  # cut after 6 dots


def test_whitespace_is_a_separator_not_a_token() -> None:
    assert rouge_tokens("材料。\n要求  写作") == rouge_tokens("材料。要求写作")
    assert "" not in rouge_tokens("第一段。\n \n第二段！\n第三段？")
    assert jieba_words(" a\tb\r\nc\u3000 ") == ["a", "b", "c"]


def test_block_memo_segments_exactly_like_jieba() -> None:
    texts = make_prompts(150, seed=11) + [a for pair in SPECIAL for a in pair]
    seg = Segmenter()
    assert [seg.rouge_tokens(t) for t in texts] == [rouge_tokens(t) for t in texts]
    assert seg.hits > seg.misses


def test_identical_prompt_is_dropped_with_rouge_chinese_score() -> None:
    text = "请以“我的家乡”为题，写一篇600字左右的记叙文，要有真情实感。"
    out = run_rouge(table([text, "写一首关于月亮的诗。", text], ["a", "b", "c"]), RougeParams())
    row = out.table.row(2, named=True)
    assert row["decision"] == "duplicate" and row["reason"] == "rouge_l"
    assert row["duplicate_of"] == "a"
    assert row["similarity"] == reference_f(text, text) == 2.0 * (1.0 / (2.0 + 1e-8))
    assert row["detail"].startswith("ROUGE-L F=1.0000 with a")


# --- greedy order and what is recorded ------------------------------------------------------


def test_greedy_compares_only_with_kept_prompts_and_records_best_match() -> None:
    texts = [
        "A B C D E F G H I J",  # p0 kept
        "A B C D E F G H X Y",  # p1: 0.8 with p0 -> dropped
        "A B C D E F Z W X Y",  # p2: 0.6 with p0; 0.8 with p1, but p1 was dropped -> kept
        "A B C D E F Z W X Q",  # p3: 0.6 with p0, 0.9 with p2 -> duplicate of p2
        "K L M N O P Q R S T",  # p4 unrelated -> kept
        "A B C D E F Z K L M",  # p5: 7 of 10 with p2, F = 0.69999999 -> kept
        "A B C D E F G H Z W X",  # p6: 0.76 with p0 and 0.86 with p2 -> the higher, p2
    ]
    out = run_rouge(table(texts), RougeParams()).table
    assert out["decision"].to_list() == ["kept", "duplicate", "kept", "duplicate", "kept",
                                         "kept", "duplicate"]
    assert out["duplicate_of"].to_list() == [None, "p0", None, "p2", None, None, "p2"]
    assert out["reason"].to_list() == [None, "rouge_l", None, "rouge_l", None, None, "rouge_l"]
    assert out["similarity"][1] == reference_f(texts[1], texts[0]) == rouge_l_f(8, 10, 10)
    assert out["similarity"][3] == reference_f(texts[3], texts[2]) == rouge_l_f(9, 10, 10)
    assert out["similarity"][6] == reference_f(texts[6], texts[2]) > reference_f(texts[6], texts[0])
    assert reference_f(texts[6], texts[0]) >= 0.7
    assert out["detail"][3] == "ROUGE-L F=0.9000 with p2 (LCS 9 of 10/10 tokens)"
    assert out["source"].to_list() == ["test"] * 7  # untouched columns pass through


def test_ties_go_to_the_earliest_kept_prompt() -> None:
    texts = ["A B C D E F G H I J", "K L M N O P Q R S T", "A B C D E F G H K L M N O P Q R"]
    assert reference_f(texts[2], texts[0]) == reference_f(texts[2], texts[1]) >= 0.6
    out = run_rouge(table(texts, ["z", "a", "m"]), RougeParams(threshold=0.6)).table
    assert out["duplicate_of"].to_list() == [None, None, "z"]  # row order, not id order
    out = run_rouge(table([texts[1], texts[0], texts[2]]), RougeParams(threshold=0.6)).table
    assert out["duplicate_of"].to_list() == [None, None, "p0"]


def test_threshold_is_a_parameter() -> None:
    texts = make_prompts(120, seed=5)
    drops = []
    for t in (0.5, 0.7, 0.9):
        out = run_rouge(table(texts), RougeParams(threshold=t))
        assert out.meta["threshold"] == t
        sims = out.table["similarity"].drop_nulls()
        assert (sims >= t).all()
        drops.append(out.meta["n_dropped"])
    assert drops[0] > drops[1] > drops[2] > 0
    with pytest.raises(ValidationError):
        RougeParams(threshold=0.0)
    with pytest.raises(ValidationError):
        RougeParams(threshold=0.7, extra=1)  # type: ignore[call-arg]


def test_f_equal_to_the_threshold_is_a_collision() -> None:
    pair = ["A B C D E F G H I J", "A B C D E F G H X Y"]  # F = rouge_l_f(8, 10, 10)
    f = reference_f(*pair)
    at = run_rouge(table(pair), RougeParams(threshold=f)).table
    above = run_rouge(table(pair), RougeParams(threshold=float(np.nextafter(f, 1.0)))).table
    assert at["decision"].to_list() == ["kept", "duplicate"] and at["similarity"][1] == f
    assert above["decision"].to_list() == ["kept", "kept"]


def test_meta_and_shape() -> None:
    texts = make_prompts(60, seed=1)
    out = run_rouge(table(texts), RougeParams())
    m = out.meta
    assert out.table["prompt_id"].to_list() == [f"p{i}" for i in range(60)]
    assert m["n_in"] == 60 and m["n_kept"] + m["n_dropped"] == 60
    assert m["n_dropped"] == out.counts().get("duplicate", 0)
    assert m["n_exact_f"] >= m["n_dropped"] and m["n_lcs"] >= m["n_exact_f"]
    assert {"seconds", "seconds_segment", "seconds_prune", "params"} <= m.keys()
    json.dumps(m)
    empty = run_rouge(table([]).cast({"text": pl.Utf8, "prompt_id": pl.Utf8}), RougeParams())
    assert empty.table.height == 0 and empty.meta["n_kept"] == 0


@pytest.mark.parametrize("bad", ["", "   ", "\n\t\u3000", None])
def test_blank_text_is_an_error_naming_the_prompt(bad: str | None) -> None:
    df = pl.DataFrame({"prompt_id": ["ok1", "broken7"], "text": ["写一篇作文。", bad]},
                      schema={"prompt_id": pl.Utf8, "text": pl.Utf8})
    with pytest.raises(ValueError, match="broken7"):
        run_rouge(df, RougeParams())


def test_rows_dropped_upstream_are_rejected() -> None:
    df = table(["写一篇作文。", "写一篇文章。"]).with_columns(
        pl.Series("decision", ["kept", "filtered"]))
    with pytest.raises(ValueError, match="p1"):
        run_rouge(df, RougeParams())


# --- the pre-filters never drop a true collision ------------------------------------------


@pytest.mark.parametrize("t", [0.7, 0.5, 0.9, 0.3, 0.123, 1.0, 0.6999999999999999])
def test_integer_bounds_keep_every_pair_whose_f_reaches_the_threshold(t: float) -> None:
    rejected = 0
    for n in range(1, 36):
        lo, hi = length_window(n, t)
        for m in range(1, 36):
            in_window = lo <= m <= hi
            assert in_window == may_collide(min(n, m), n, m, t)
            for lcs in range(min(n, m) + 1):
                if rouge_l_f(lcs, n, m) >= t:
                    assert may_collide(lcs, n, m, t) and in_window, (lcs, n, m)
                elif not may_collide(lcs, n, m, t):
                    rejected += 1
    assert rejected > 0


def test_multiset_bound_is_the_exact_multiset_intersection() -> None:
    rng = random.Random(2)
    vocab = [f"w{i}" for i in range(30)] + ["，", "的", "。"] * 10
    lists = [[rng.choice(vocab) for _ in range(rng.randint(1, 40))] for _ in range(80)]
    occ = _Occurrences(encode_tokens(lists))
    assert occ.dense.shape[1] > 0 and occ.sparse.shape[1] > 0  # both halves exercised
    rows = np.arange(80)
    inter = occ.intersections(rows, rows)
    for a in range(80):
        for b in range(80):
            expected = sum((Counter(lists[a]) & Counter(lists[b])).values())
            assert inter[a, b] == expected
            la, lb = encode_tokens([lists[a], lists[b]])
            assert LCSseq.similarity(la, lb) <= expected


def _lcs(a: list[str], b: list[str]) -> int:
    """Textbook dynamic-programming LCS length (independent of rapidfuzz)."""
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def test_two_step_bound_lets_through_exactly_the_pairs_the_multiset_bound_does() -> None:
    # Dense-product-plus-rare-slack first, the rare part only for what passes: the pairs
    # kept must be exactly those with 2·I >= need, and every pair with F >= t among them.
    rng = random.Random(5)
    vocab = [f"w{i}" for i in range(60)] + ["，", "的", "。", "写"] * 12
    lists = [[rng.choice(vocab) for _ in range(rng.randint(1, 24))] for _ in range(70)]
    lists += [[*lst[: len(lst) * 3 // 4], rng.choice(vocab)] for lst in lists[:30]]  # near pairs
    occ = _Occurrences(encode_tokens(lists))
    assert occ.dense.shape[1] > 0 and occ.sparse.shape[1] > 0
    n = len(lists)
    rows = np.arange(n)
    lengths = np.array([len(lst) for lst in lists], dtype=np.float64)
    exact = np.array([[sum((Counter(a) & Counter(b)).values()) for b in lists] for a in lists])
    scores = {(a, b): rouge_l_f(_lcs(lists[a], lists[b]), len(lists[a]), len(lists[b]))
              for a in range(n) for b in range(a + 1, n)}
    for t in (0.7, 0.5, 0.9):
        need = t * (lengths[:, None] + lengths[None, :])
        ia, ib = occ.passing(rows, rows, need)
        assert set(zip(ia.tolist(), ib.tolist(), strict=True)) == set(
            zip(*np.nonzero(2 * exact >= need), strict=True))
        passed = set(zip(ia.tolist(), ib.tolist(), strict=True))
        # the fused first step (one product with the need folded in) passes the same pairs
        fused = _Occurrences(encode_tokens(lists))
        fused.set_threshold(t * (1 - 1e-9))
        fa, fb = fused.passing(rows, rows, t * (1 - 1e-9) * (lengths[:, None] + lengths[None, :]))
        assert set(zip(fa.tolist(), fb.tolist(), strict=True)) == set(
            zip(*np.nonzero(2 * exact >= t * (1 - 1e-9) * (lengths[:, None] + lengths[None, :])),
                strict=True))
        reaching = {pair for pair, f in scores.items() if f >= t}
        assert reaching <= passed
        assert t > 0.7 or len(reaching) > 10  # the check has pairs to hold


@cache
def _brute_force_scores(n: int, seed: int) -> tuple[list[str], dict[tuple[int, int], float]]:
    texts = make_prompts(n, seed=seed)
    return texts, {}


def brute_force(texts: list[str], t: float, scores: dict[tuple[int, int], float]
                ) -> list[tuple[str, float] | None]:
    """The issue's definition, every pair scored by rouge-chinese itself."""
    kept: list[int] = []
    out: list[tuple[str, float] | None] = []
    for j in range(len(texts)):
        best: tuple[int, float] | None = None
        for i in kept:
            if (j, i) not in scores:
                ref = ROUGE_L.get_scores(joined(texts[j]), joined(texts[i]))
                scores[j, i] = float(ref[0]["rouge-l"]["f"])
            f = scores[j, i]
            if f >= t and (best is None or f > best[1]):
                best = (i, f)
        if best is None:
            kept.append(j)
            out.append(None)
        else:
            out.append((f"p{best[0]}", best[1]))
    return out


def _stage_result(texts: list[str], t: float) -> list[tuple[str, float] | None]:
    out = run_rouge(table(texts), RougeParams(threshold=t)).table
    return [None if d is None else (d, s)
            for d, s in zip(out["duplicate_of"], out["similarity"], strict=True)]


@pytest.mark.parametrize("t", [0.7, 0.55])
def test_pruning_equals_brute_force_with_rouge_chinese(t: float) -> None:
    texts, scores = _brute_force_scores(90, 13)
    expected = brute_force(texts, t, scores)
    assert sum(e is not None for e in expected) >= 20  # the set really has collisions
    assert _stage_result(texts, t) == expected


def test_block_and_band_sizes_do_not_change_the_result() -> None:
    token_lists = [tokens(t) for t in make_prompts(200, seed=21)]
    ref = prune(token_lists, 0.7).matches
    assert sum(m is not None for m in ref) > 40
    for block, band in [(7, 3), (1, 1), (1000, 5)]:
        assert prune(token_lists, 0.7, block_size=block, band_size=band).matches == ref


@pytest.mark.slow
def test_pruning_equals_brute_force_with_rouge_chinese_400_prompts() -> None:
    texts, scores = _brute_force_scores(400, 17)
    for t in (0.7, 0.6):
        assert _stage_result(texts, t) == brute_force(texts, t, scores)


def test_real_prompts_segment_and_score_exactly() -> None:
    path = SHARED_DATA / "writingpreferencebench" / "prompts.jsonl"
    if not path.exists():
        pytest.skip(f"../shared/data not present: {path}")
    texts = [json.loads(line)["prompt"] for line in path.read_text("utf-8").splitlines()]
    texts = [t for t in texts if t.strip() and len(t) < 300]
    seg = Segmenter()
    assert [seg.rouge_tokens(t) for t in texts] == [rouge_tokens(t) for t in texts]
    rng = random.Random(0)
    for _ in range(40):
        a, b = rng.sample(texts, 2)
        assert rouge_l_pair(tokens(a), tokens(b)) == reference_f(a, b)
