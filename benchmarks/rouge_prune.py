"""Benchmark of the rouge stage: jieba segmentation + greedy ROUGE-L pruning.

Generates seeded sets of Chinese essay-request prompts (exam-style and
chatbot-style, recombined from phrase lists) of which 20% are near-duplicates
made by small edits of an earlier prompt, then times ``run_rouge`` on them.
Each size runs in a fresh subprocess so its peak RSS is its own. After timing
it checks exactness: sampled pairs against rouge-chinese (must match bit for
bit), and the whole decision list against a brute-force greedy without any
pre-filter.

    .venv/bin/python benchmarks/rouge_prune.py --sizes 1000 3000 10000 --repeats 3 --seed 0
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np
import polars as pl
from rapidfuzz import process
from rapidfuzz.distance import LCSseq

from essaybench.curate.rouge import RougeParams, encode_tokens, rouge_l_f, run_rouge
from essaybench.curate.segment import init_jieba, rouge_string, rouge_tokens, rouge_view

TARGET_SECONDS = 20.0
TARGET_RSS_MB = 500.0
TARGET_SIZE = 10_000

TOPICS = [
    "科技与生活", "我的家乡", "坚持的力量", "青春的模样", "成长的烦恼", "书香伴我行",
    "那一刻，我长大了", "传统文化的传承", "人工智能与未来", "保护环境，从我做起", "诚信",
    "友谊的真谛", "时间的价值", "读书的意义", "劳动最光荣", "我家的家风", "梦想与现实",
    "挫折也是一种财富", "感恩父母", "网络时代的阅读", "城市与乡村", "规则与自由",
    "平凡中的伟大", "我眼中的英雄", "春天的故事", "一次难忘的旅行", "校园里的那棵老槐树",
    "秋天的色彩", "故乡的年味", "爷爷的老屋", "中国航天的追梦之路", "垃圾分类",
    "手机与青少年", "快与慢", "得与失", "学会独处", "心中的远方", "生活中的仪式感",
    "让脚步慢下来", "匠心", "少年强则国强", "敬畏自然", "家国情怀", "创新精神",
    "志愿服务", "短视频时代的我们", "躺平还是奋斗", "一张老照片", "雨中的城市",
    "我的语文老师", "舌尖上的家乡菜", "二十四节气", "长城", "黄河", "小区里的快递员",
    "第一次做饭", "运动会上的我", "妈妈的手", "夏夜的星空", "高铁改变了中国",
    "大熊猫的一天", "如何科学地减肥", "月亮为什么有圆缺", "桥的演变", "一杯茶的旅程",
]
GENRES = ["议论文", "记叙文", "说明文", "散文", "演讲稿", "读后感", "作文", "文章", "描写文",
          "随笔", "倡议书", "书信"]
WORDS = ["600", "700", "800", "1000", "1200", "1500", "500", "900", "2000", "300"]
REQUIREMENTS = [
    "立意自定", "文体自选（诗歌除外）", "自拟标题", "不要套作，不得抄袭", "不得泄露个人信息",
    "观点明确，论据充分", "要有真情实感", "语言生动，描写细腻", "结构清晰，条理分明",
    "运用多种说明方法", "注意首尾呼应", "至少使用两种修辞手法", "可以适当引用名人名言",
    "结合自身经历", "以第一人称叙述", "书写工整，卷面整洁", "选好角度，确定立意",
    "要有具体的事例", "字迹清楚，标点正确", "文中不得出现真实的校名和人名",
    "详略得当，重点突出", "联系社会现实", "适当运用环境描写", "开头要吸引读者",
    "结尾要升华主题", "多用短句，节奏明快", "语言通俗易懂，适合小学生阅读",
    "引用至少三个数据", "采用总分总的结构", "加入一段人物对话", "用倒叙的手法",
    "突出细节描写", "避免空洞的口号", "分三个小标题来写", "写出景物的特点",
    "按照时间顺序说明", "写清楚事情的起因、经过和结果", "表达对未来的期待",
]
PEOPLE = [
    "一位乡村教师", "一名外卖骑手", "一位退休工程师", "一个留守儿童", "一名高三学生",
    "一位环卫工人", "一名年轻的科研人员", "一位非遗传承人", "一名志愿者", "一位老兵",
    "一位单亲妈妈", "一名大学生村官", "一位盲人钢琴师", "一名消防员", "一位社区医生",
    "一个初中男孩", "一位80岁的老奶奶", "一名程序员", "一位守林人", "一名快递小哥",
]
EVENTS = [
    "坚持三十年在山区授课", "在暴雨中救起了落水的儿童", "放弃城市的高薪工作回乡种茶",
    "用短视频记录家乡的变化", "自学十年终于考上了研究生", "把一生的积蓄捐给了希望小学",
    "带领村民通过电商卖出了滞销的苹果", "在实验室里经历了上百次失败后取得突破",
    "为了守护一片湿地四处奔走", "把奶奶的剪纸手艺做成了网店", "每天清晨为孤寡老人送早餐",
    "用AI技术修复了上千张老照片", "骑自行车走遍了全国34个省份", "坚持写了二十年的日记",
    "在地震废墟下坚守了七十二小时", "发明了一种帮助盲人过马路的装置",
    "拒绝了一笔来路不明的巨款", "在深夜的急诊室里连续工作了三十个小时",
    "教会了村里的老人使用智能手机", "把废弃的厂房改造成了社区图书馆",
]
REACTIONS = [
    "这件事在网上引发热议。", "有人为之感动，也有人表示不理解。", "网友纷纷点赞。",
    "对此，人们看法不一。", "这让很多人重新思考成功的意义。", "他的故事被写进了当地的教材。",
    "有评论说：“这才是真正的英雄。”", "也有人质疑这样做是否值得。",
    "当地媒体对此进行了专题报道。", "这一举动温暖了整座城市。",
]
QUOTES = [
    "古人云：“读万卷书，行万里路。”", "鲁迅先生说过：“其实地上本没有路，走的人多了，也便成了路。”",
    "孔子曰：“三人行，必有我师焉。”", "爱因斯坦说：“想象力比知识更重要。”",
    "《论语》有言：“己所不欲，勿施于人。”", "苏轼写道：“回首向来萧瑟处，归去，也无风雨也无晴。”",
    "网上流行一句话：“你所浪费的今天，是昨天死去的人奢望的明天。”",
    "有人说，人生就像一场马拉松，重要的不是起点，而是坚持到终点的毅力。",
    "调查显示，超过六成的中学生每天使用短视频应用超过两小时。",
    "2023年，我国研制的大型客机C919正式投入商业运营。",
]
IDENTITIES = ["初二学生", "高一学生", "小学五年级学生", "大学中文系学生", "语文老师", "学生家长",
              "公司职员", "高三文科生", "留学生", "社区工作者"]
PURPOSES = ["参加学校的征文比赛", "完成语文课的周末作业", "在周一的升旗仪式上发言",
            "投稿给校报", "准备期末考试", "参加市里的演讲比赛", "给班级的公众号供稿",
            "参加“我和我的祖国”主题活动", "练习高考作文", "辅导孩子写作业"]
EXAM_CLOSERS = [
    "要求：{r}；不少于{w}字。",
    "请结合材料内容和自己的体验与思考，写一篇{w}字左右的{g}。要求：{r}。",
    "读了上面的材料，你有怎样的感触与思考？请写一篇{g}，{r}，不少于{w}字。",
    "根据材料写一篇文章，{r}，字数不少于{w}字。",
    "以上材料引发了你怎样的联想？请以“{t}”为题写一篇{g}。{r}。",
    "请从材料中选取一个角度，写一篇{g}。{r}。",
    "要求选准角度，确定立意，明确文体，{r}，{w}字以上。",
]
OPENINGS = ["", "", "你好，", "老师好，", "请问", "您好！", "在吗？", "帮个忙：", "求助：",
            "小助手，", "我有个写作任务。", "急需一篇作文！"]
CONTEXTS = ["我是一名{i}，最近要{p}。", "这次是为了{p}，", "下周要{p}，时间很紧。",
            "作为{i}，我一直想写点东西。", "我们班正在准备{p}。", "", "", "我家孩子是{i}，"]
TASKS = ["帮我写一篇关于“{t}”的{g}", "请以“{t}”为题写一篇{g}", "能不能写一篇题为《{t}》的{g}",
         "围绕{t}这个话题写一篇{g}", "给我一篇{g}范文，主题是{t}", "我想要一篇讲{t}的{g}",
         "写{g}一篇，标题《{t}》", "用“{t}”作题目写{g}", "Please write an essay: {t}，写成{g}"]
LENGTHS = ["，{w}字左右", "，不少于{w}字", "，字数控制在{w}字以内", "，篇幅大约{w}字", "（{w}字）",
           "", "，{w}字上下"]
REQ_INTROS = ["。要求：", "，要求", "。注意", "。希望能", "，最好", "。具体要求如下：", "。"]
REQ_JOINS = ["；", "，", "、", "。另外，", "，还要", "；同时"]
CLOSINGS = ["", "", "谢谢！", "辛苦了。", "尽快给我。", "写得好一点哦。", "拜托了！"]
FILLERS = ["麻烦你，", "老师布置了作业：", "急！", "谢谢！", "请认真完成。", "（初中）"]
DETAILS = ["文中可以写到{x}的经历。", "参考这样一个例子：{x}。", "我想到了{x}这件事。", ""]


def material(rng: random.Random) -> str:
    parts = [f"{rng.choice(PEOPLE)}{rng.choice(EVENTS)}。{rng.choice(REACTIONS)}"
             for _ in range(rng.randint(1, 2))]
    if rng.random() < 0.4:
        parts.insert(rng.randint(0, len(parts)), rng.choice(QUOTES))
    return "".join(parts)


def requirements(rng: random.Random) -> str:
    reqs = rng.sample(REQUIREMENTS, rng.randint(2, 4))
    return "".join(r + rng.choice(REQ_JOINS) for r in reqs[:-1]) + reqs[-1]


def varied_prompt(rng: random.Random) -> str:
    slots = {"t": rng.choice(TOPICS), "g": rng.choice(GENRES), "w": rng.choice(WORDS),
             "i": rng.choice(IDENTITIES), "p": rng.choice(PURPOSES),
             "x": rng.choice(PEOPLE) + rng.choice(EVENTS), "r": requirements(rng)}
    if rng.random() < 0.35:
        closer = rng.choice(EXAM_CLOSERS).format(**slots)
        return f"阅读下面的材料，根据要求写作。{material(rng)}{closer}"
    parts = [rng.choice(OPENINGS), rng.choice(CONTEXTS), rng.choice(TASKS), rng.choice(LENGTHS),
             rng.choice(REQ_INTROS), "{r}。", rng.choice(DETAILS), rng.choice(CLOSINGS)]
    text = "".join(parts).format(**slots)
    return text if rng.random() < 0.75 else material(rng) + text


def _near_duplicate(text: str, rng: random.Random) -> str:
    """One or two small edits: a number, a clause, a word, an added phrase."""
    for _ in range(rng.randint(1, 2)):
        edit = rng.randrange(4)
        if edit == 0:
            for w in WORDS:
                if w in text:
                    text = text.replace(w, rng.choice(WORDS), 1)
                    break
        elif edit == 1:
            clauses = text.split("，")
            if len(clauses) > 3:
                del clauses[rng.randrange(1, len(clauses) - 1)]
            text = "，".join(clauses)
        elif edit == 2:
            for a, b in (("写一篇", "写一篇优秀的"), ("要求", "具体要求"), ("不少于", "至少"),
                         ("文章", "作文"), ("请", "请你")):
                if a in text:
                    text = text.replace(a, b, 1)
                    break
        else:
            filler = rng.choice(FILLERS)
            text = filler + text if rng.random() < 0.5 else text + filler
    return text


def make_prompts(n: int, seed: int, dup_share: float = 0.2) -> list[str]:
    """``n`` prompts, ``dup_share`` of them small edits of an earlier prompt."""
    rng = random.Random(seed)
    n_base = n - round(n * dup_share)
    base = [varied_prompt(rng) for _ in range(n_base)]
    keyed = [(float(i), text) for i, text in enumerate(base)]
    for _ in range(n - n_base):
        src = rng.randrange(n_base)
        keyed.append((rng.uniform(src, n_base), _near_duplicate(base[src], rng)))
    keyed.sort(key=lambda kt: kt[0])
    return [text for _, text in keyed]


def _table(texts: list[str]) -> pl.DataFrame:
    return pl.DataFrame({
        "prompt_id": [f"p{i:06d}" for i in range(len(texts))],
        "text": texts,
        "decision": ["kept"] * len(texts),
    })


def _f_matrix(lcs: np.ndarray[Any, Any], n: np.ndarray[Any, Any],
              m: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    # numpy float64 + - * / are IEEE-exact like Python's, so this equals rouge_l_f elementwise.
    lcs_f = lcs.astype(np.float64)
    r = lcs_f / m[None, :]
    p = lcs_f / n[:, None]
    return np.asarray(2.0 * ((p * r) / (p + r + 1e-8)))


def brute_force_greedy(
    token_lists: list[list[str]], threshold: float
) -> list[tuple[int, float] | None]:
    """The issue's definition with no pre-filter: every row against every earlier kept row."""
    strings = encode_tokens(token_lists)
    lengths = np.array([len(s) for s in strings], dtype=np.int64)
    kept = np.zeros(len(strings), dtype=bool)
    out: list[tuple[int, float] | None] = []
    block = 256
    for start in range(0, len(strings), block):
        stop = min(start + block, len(strings))
        lcs = process.cdist(strings[start:stop], strings[:stop], scorer=LCSseq.similarity,
                            dtype=np.int32, workers=-1)
        f = _f_matrix(lcs, lengths[start:stop], lengths[:stop])
        for j in range(start, stop):
            row = np.where(kept[:j], f[j - start, :j], -1.0)
            i = int(np.argmax(row)) if j else 0  # argmax: first of equal maxima = earliest
            if j and row[i] >= threshold:
                out.append((i, float(row[i])))
            else:
                kept[j] = True
                out.append(None)
    return out


def _reference_f(rouge: Any, a: str, b: str) -> float:
    return float(rouge.get_scores(a, b)[0]["rouge-l"]["f"])


def exactness(texts: list[str], out: pl.DataFrame, threshold: float, seed: int) -> dict[str, Any]:
    from rouge_chinese import Rouge

    rouge = Rouge()
    rng = random.Random(seed + 1)
    joined = [rouge_string(t) for t in texts]
    tokens = [rouge_view(s) for s in joined]
    row_of = {pid: i for i, pid in enumerate(out["prompt_id"].to_list())}
    dup_of = out["duplicate_of"].to_list()
    sim = out["similarity"].to_list()
    dropped = [j for j, d in enumerate(dup_of) if d is not None]

    # Dropped pairs: the recorded similarity must be rouge-chinese's F.
    pairs_dropped = [(j, row_of[dup_of[j]]) for j in rng.sample(dropped, min(200, len(dropped)))]
    bad_recorded = sum(_reference_f(rouge, joined[j], joined[i]) != sim[j]
                       for j, i in pairs_dropped)

    # Near-threshold pairs (fast F in [t-0.1, t+0.1]) from a random subset, then random pairs.
    subset = rng.sample(range(len(texts)), min(1500, len(texts)))
    enc = encode_tokens([tokens[i] for i in subset])
    lens = np.array([len(s) for s in enc])
    f = _f_matrix(process.cdist(enc, enc, scorer=LCSseq.similarity, dtype=np.int32, workers=-1),
                  lens, lens)
    near = [(subset[a], subset[b]) for a, b in zip(*np.nonzero(np.abs(f - threshold) <= 0.1),
                                                   strict=True) if a < b]
    pairs_near = rng.sample(near, min(150, len(near)))
    pairs = pairs_dropped + pairs_near
    while len(pairs) < 500:
        pairs.append((rng.randrange(len(texts)), rng.randrange(len(texts))))
    mismatches = []
    for a, b in pairs:
        lcs = int(LCSseq.similarity(*encode_tokens([tokens[a], tokens[b]])))
        fast = rouge_l_f(lcs, len(tokens[a]), len(tokens[b]))
        ref = _reference_f(rouge, joined[a], joined[b])
        if fast != ref:
            mismatches.append((a, b, fast, ref))

    # Kept prompts: the best kept partner of sampled kept prompts, scored by rouge-chinese.
    kept = [j for j, d in enumerate(dup_of) if d is None]
    kenc = encode_tokens([tokens[i] for i in kept])
    klen = np.array([len(s) for s in kenc])
    sample = rng.sample(range(len(kept)), min(100, len(kept)))
    kf = _f_matrix(process.cdist([kenc[s] for s in sample], kenc, scorer=LCSseq.similarity,
                                 dtype=np.int32, workers=-1), klen[sample], klen)
    kf[np.arange(len(sample)), sample] = -1.0
    best = kf.argmax(axis=1)
    kept_ref = [_reference_f(rouge, joined[kept[s]], joined[kept[int(b)]])
                for s, b in zip(sample, best, strict=True)]

    brute = brute_force_greedy(tokens, threshold)
    mine = [None if d is None else (row_of[d], s) for d, s in zip(dup_of, sim, strict=True)]
    return {
        "pairs_checked": len(pairs), "near_threshold_pairs": len(pairs_near),
        "dropped_pairs_checked": len(pairs_dropped), "recorded_similarity_mismatches": bad_recorded,
        "mismatches": len(mismatches), "mismatch_examples": mismatches[:5],
        "kept_best_partner_checked": len(kept_ref),
        "kept_best_partner_max_f": max(kept_ref, default=0.0),
        "kept_collisions": sum(f >= threshold for f in kept_ref),
        "brute_force_agrees": brute == mine,
    }


def child(size: int, repeats: int, seed: int) -> dict[str, Any]:
    texts = make_prompts(size, seed)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    init_jieba()
    init_s = time.perf_counter() - t0
    params = RougeParams()
    runs = []
    out = None
    for _ in range(repeats):
        table = _table(texts)
        t0, c0 = time.perf_counter(), time.process_time()
        res = run_rouge(table, params)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        runs.append((res.meta["seconds_segment"], res.meta["seconds_prune"], wall, cpu))
        out = res
    assert out is not None
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    for text in texts:  # what segmentation costs without the block memo
        rouge_tokens(text)
    plain_s = time.perf_counter() - t0
    return {
        "size": size, "load_avg_1min": load, "jieba_init_s": init_s,
        "segment_s": statistics.median(r[0] for r in runs),
        "prune_s": statistics.median(r[1] for r in runs),
        "total_s": statistics.median(r[2] for r in runs),
        "total_cpu_s": statistics.median(r[3] for r in runs),
        "segment_plain_jieba_s": plain_s,
        "peak_rss_mb": peak_mb,
        "kept": out.meta["n_kept"], "dropped": out.meta["n_dropped"],
        "n_bound": out.meta["n_bound"], "n_lcs": out.meta["n_lcs"],
        "n_exact_f": out.meta["n_exact_f"], "memo": out.meta["jieba_block_memo"],
        "brute_force_pairs": size * (size - 1) // 2,
        "check": exactness(texts, out.table, params.threshold, seed),
    }


def report(r: dict[str, Any], repeats: int) -> bool:
    c = r["check"]
    total = r["jieba_init_s"] + r["total_s"]
    print(f"\nsize {r['size']} (load avg {r['load_avg_1min']:.1f} on 2 cores), "
          f"median of {repeats}: segment {r['segment_s']:.2f} s, prune {r['prune_s']:.2f} s, "
          f"total {r['total_s']:.2f} s wall / {r['total_cpu_s']:.2f} s CPU; "
          f"+ jieba init {r['jieba_init_s']:.2f} s = {total:.2f} s; "
          f"peak RSS {r['peak_rss_mb']:.0f} MB")
    print(f"  segmentation without the block memo: {r['segment_plain_jieba_s']:.2f} s "
          f"(memo hits {r['memo']['hits']:,}, misses {r['memo']['misses']:,})")
    print(f"  kept {r['kept']}, dropped {r['dropped']}; pairs: brute force "
          f"{r['brute_force_pairs']:,}, multiset bound {r['n_bound']:,}, "
          f"LCS {r['n_lcs']:,}, exact F {r['n_exact_f']:,}")
    print(f"  exactness vs rouge-chinese: {c['pairs_checked']} pairs "
          f"({c['dropped_pairs_checked']} dropped, {c['near_threshold_pairs']} near threshold): "
          f"mismatches {c['mismatches']}, recorded-similarity mismatches "
          f"{c['recorded_similarity_mismatches']} {c['mismatch_examples'] or ''}")
    print(f"  kept: best kept partner of {c['kept_best_partner_checked']} kept prompts, "
          f"max rouge-chinese F {c['kept_best_partner_max_f']:.4f}, collisions "
          f"{c['kept_collisions']}; brute-force greedy (no pre-filter) agrees: "
          f"{c['brute_force_agrees']}")
    good = bool(c["mismatches"] == 0 and c["recorded_similarity_mismatches"] == 0
                and c["kept_collisions"] == 0 and c["brute_force_agrees"])
    if r["size"] == TARGET_SIZE:
        fast = total <= TARGET_SECONDS and r["peak_rss_mb"] <= TARGET_RSS_MB
        print(f"  target {TARGET_SECONDS:.0f} s / {TARGET_RSS_MB:.0f} MB: "
              f"{'PASS' if fast else 'FAIL'}")
        good = good and fast
    print(f"  {'PASS' if good else 'FAIL'}")
    return good


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 3000, 10000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.repeats, args.seed)))
        return

    print(f"targets at {TARGET_SIZE}: total with jieba init <= {TARGET_SECONDS:.0f} s, "
          f"peak RSS <= {TARGET_RSS_MB:.0f} MB; exactness mismatches 0")
    ok = True
    for size in args.sizes:
        # A fresh process per size, so each peak RSS is that size's own.
        proc = subprocess.run(
            [sys.executable, __file__, "--child", str(size), "--repeats", str(args.repeats),
             "--seed", str(args.seed)], capture_output=True, text=True, check=True)
        ok = report(json.loads(proc.stdout.strip().splitlines()[-1]), args.repeats) and ok
    print(f"\noverall: {'PASS' if ok else 'FAIL'}")


if __name__ == "__main__":
    main()
