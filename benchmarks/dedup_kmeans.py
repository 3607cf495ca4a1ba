"""Benchmark the dedup stage on generated Chinese essay prompts with planted near duplicates.

Base prompts are template × topic (unique pairs, so many share template wording,
as real exam prompts do); 20% of the rows are rewordings of an earlier base
(synonym swaps, 请/帮我 prefixes, clause reordering, added or dropped clauses).
Prints, per size: wall time by phase, chosen k, dropped counts, recall of the
planted near duplicates, base prompts wrongly dropped, and the recall the same
threshold reaches with no blocking (k = 1), which isolates what clustering costs.

    .venv/bin/python benchmarks/dedup_kmeans.py --sizes 1000 3000 10000 --seed 0
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
import polars as pl

from essaybench.core.hashing import prompt_id
from essaybench.curate.dedup import DedupParams, run_dedup


def _words(spaced: str) -> list[str]:
    return spaced.split()


ABSTRACT = _words(
    "诚信 勤奋 责任 梦想 友谊 坚持 创新 自由 规则 宽容 感恩 勇气 孤独 成长 选择 担当 奋斗 青春 "
    "传统 变化 平凡 尊重 合作 竞争 谦虚 自信 专注 耐心 幸福 时间 读书 劳动 节俭 善良 智慧 思考 "
    "失败 成功 机遇 挑战 理想 信念 乡愁 记忆 等待 陪伴 告别 远方 故乡 光 路 桥 门 窗 根 种子 "
    "风景 声音 味道 距离 边界 镜子 影子 脚步 温度 沉默 倾听 分享 付出 收获 热爱 敬畏 好奇 个性 "
    "从众 底线 格局 初心 匠心 家风 书香 网络 科技 自然 文化 历史 未来 榜样 微笑 眼泪 习惯"
)
SCENES = _words(
    "秋天的校园 雨后的西湖 冬日的雪景 清晨的菜市场 夏夜的星空 家乡的小河 热闹的庙会 黄昏的海边 "
    "春天的田野 深夜的街道 安静的图书馆 古老的小巷 公园的早晨 山间的云雾 学校运动会 外婆的菜园 "
    "放学后的操场 雨中的车站 除夕夜的厨房 晨雾中的江南小镇 丰收的稻田 夜晚的灯会 冬天的早餐铺"
)
PEOPLE = _words(
    "母亲 父亲 爷爷 奶奶 外婆 外公 班主任 同桌 邻居 小学老师 门卫大爷 好朋友 哥哥 妹妹 "
    "清洁工 社区医生 快递员 数学老师 表姐 老校长"
)
THINGS = _words(
    "大熊猫 二十四节气 故宫 长城 智能手机 茶叶 京剧 中秋节 高铁 垃圾分类 蜜蜂 赵州桥 活字印刷术 "
    "指南针 太阳能 火山 彩虹 候鸟迁徙 人工智能 共享单车 豆腐的制作 月饼 汉字的演变 针灸 "
    "青花瓷 都江堰 熊猫血 微波炉 天气预报 地铁 二维码 纸的发明 丝绸之路 潮汐 北斗导航"
)
BOOKS = _words(
    "平凡的世界 红楼梦 骆驼祥子 西游记 三国演义 水浒传 朝花夕拾 边城 围城 活着 呐喊 城南旧事 "
    "老人与海 简爱 海底两万里 钢铁是怎样炼成的 儒林外史 昆虫记 草房子 傅雷家书 乡土中国 "
    "红星照耀中国"
)
EVENTS = _words(
    "第一次做饭 一次失败的考试 学骑自行车 参加运动会 搬家 养小狗 去乡下过暑假 帮助陌生人 "
    "和朋友吵架又和好 学游泳 登山 第一次上台演讲 参加志愿活动 照顾生病的家人 丢失心爱的东西 "
    "一次旅行 学做手工 过生日 迷路 参加比赛"
)
PAIRS = [f"{a}与{b}" for a in ABSTRACT[:40] for b in ABSTRACT[40:]]  # more argumentative topics

TEMPLATES: list[tuple[str, list[str]]] = [
    ("写一篇{n}字的议论文，题目是《论{t}》。", ABSTRACT + PAIRS),
    ("以“{t}”为话题，写一篇不少于{n}字的议论文，自选角度，自拟标题。", ABSTRACT + PAIRS),
    ("请围绕“{t}”写一篇议论文，要有明确的论点和至少两个论据，{n}字左右。", ABSTRACT + PAIRS),
    ("以“{t}”为题写一篇作文，文体不限（诗歌除外），不少于{n}字。", ABSTRACT),
    ("有人说{t}比天赋更重要，你怎么看？写一篇议论文，观点鲜明，不少于{n}字。", ABSTRACT),
    ("阅读下面的材料，根据要求写作。关于“{t}”，不同的人有不同的理解。请结合材料写一篇文章，"
     "体现你的感悟与思考。要求：选准角度，确定立意，自拟标题；不少于{n}字。", ABSTRACT + PAIRS),
    ("请以“我的{t}”为题写一篇记叙文，要求叙事完整，有细节描写，不少于{n}字。", PEOPLE),
    ("写一篇记叙文，讲述你和{t}之间发生的一件难忘的事，写出真情实感，{n}字左右。", PEOPLE),
    ("以“{t}”为题，写一篇{n}字左右的记叙文，记录这段经历给你的启发。", EVENTS),
    ("请写一篇作文，记叙你{t}的经历，要有具体的细节和心理描写，不少于{n}字。", EVENTS),
    ("描写一下{t}，写一篇{n}字左右的描写文，要运用比喻和拟人的修辞手法。", SCENES),
    ("写一篇写景散文，描写{t}，要调动视觉、听觉、嗅觉等多种感官，不少于{n}字。", SCENES),
    ("请以{t}为对象写一段景物描写，突出季节特点和你的感受，{n}字以内。", SCENES),
    ("描写你的{t}的外貌、神态和动作，写一篇{n}字的人物描写短文。", PEOPLE),
    ("写一篇说明文，介绍{t}，要求条理清晰，使用列数字、举例子等说明方法，{n}字左右。", THINGS),
    ("请写一篇介绍{t}的说明文，面向小学生，语言通俗易懂，字数在{n}字以内。", THINGS),
    ("以“{t}”为说明对象，写一篇科普短文，说明它的原理或特点，不少于{n}字。", THINGS),
    ("写一篇读后感，谈谈你读《{t}》之后的感受，{n}字左右。", BOOKS),
    ("写一篇《{t}》的读书笔记，重点分析其中一个人物形象，不少于{n}字。", BOOKS),
    ("帮我写一篇关于{t}的演讲稿，面向初中生，时长大约五分钟。", ABSTRACT),
]
LENGTHS = ["400", "500", "600", "700", "800", "1000", "1200"]
SWAPS = [("写一篇", "撰写一篇"), ("题目是", "题目为"), ("为题", "为题目"), ("不少于", "至少"),
         ("左右", "上下"), ("要求", "需要"), ("谈谈", "说说"), ("感受", "体会"), ("描写", "描绘"),
         ("讲述", "记叙"), ("800字", "八百字"), ("600字", "六百字"), ("1000字", "一千字"),
         ("清晰", "清楚"), ("难忘", "印象深刻"), ("介绍", "讲解"), ("。", "！")]
PREFIXES = ["请", "帮我", "请你", "麻烦"]
SUFFIXES = ["，谢谢", "，语言要生动一些", "，尽量贴近生活", "，不要写成诗歌"]


@dataclass(frozen=True)
class Corpus:
    texts: list[str]
    family: list[int]  # index of the base prompt a row was made from (its own index for a base)
    planted: list[bool]  # True for a planted near duplicate


def reword(text: str, rng: np.random.Generator) -> str:
    """A rewording of ``text``: 2–3 random edits that keep its topic and quoted spans."""
    out = text
    for _ in range(int(rng.integers(2, 4))):
        op = int(rng.integers(0, 5))
        if op == 0:
            for old, new in [SWAPS[int(i)] for i in rng.permutation(len(SWAPS))]:
                if old in out:
                    out = out.replace(old, new, 1)
                    break
        elif op == 1:
            stripped = next((out[len(p):] for p in PREFIXES if out.startswith(p)), None)
            out = stripped if stripped else PREFIXES[int(rng.integers(len(PREFIXES)))] + out
        elif op == 2:
            fresh = [x for x in SUFFIXES if x not in out]
            if fresh:
                out = out.rstrip("。！") + fresh[int(rng.integers(len(fresh)))] + "。"
        else:  # 3, 4: swap two clauses after the first, or drop one (never the topic clause)
            clauses = out.rstrip("。！").split("，")
            if len(clauses) >= 3:
                a, b = sorted(int(i) for i in rng.choice(np.arange(1, len(clauses)), 2,
                                                          replace=False))
                if op == 3:
                    clauses[a], clauses[b] = clauses[b], clauses[a]
                elif len(clauses) >= 4:
                    del clauses[b]
                out = "，".join(clauses) + "。"
    return out if out != text else "请" + text


def make_corpus(size: int, seed: int, near_share: float = 0.2) -> Corpus:
    rng = np.random.default_rng(seed)
    n_near = round(size * near_share)
    n_base = size - n_near
    combos = [(ti, t) for ti, (_, topics) in enumerate(TEMPLATES) for t in topics]
    if n_base > len(combos):
        raise ValueError(f"only {len(combos)} distinct template × topic prompts; size too large")
    chosen = rng.choice(len(combos), n_base, replace=False)
    bases = []
    for c in chosen:
        ti, topic = combos[int(c)]
        bases.append(TEMPLATES[ti][0].format(t=topic, n=LENGTHS[int(rng.integers(len(LENGTHS)))]))
    # A rewording lands somewhere after its base, so the base is the row to keep.
    keys = [float(i) for i in range(n_base)]
    items = [(b, i, False) for i, b in enumerate(bases)]
    for _ in range(n_near):
        src = int(rng.integers(n_base))
        items.append((reword(bases[src], rng), src, True))
        keys.append(float(rng.uniform(src + 0.01, n_base)))
    order = np.argsort(np.array(keys), kind="stable")
    rows = [items[int(o)] for o in order]
    return Corpus([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])


def as_table(corpus: Corpus) -> pl.DataFrame:
    return pl.DataFrame({
        "record_id": [f"r{i}" for i in range(len(corpus.texts))],
        "text": corpus.texts,
        "prompt_id": [prompt_id(t) for t in corpus.texts],
        "decision": ["kept"] * len(corpus.texts),
    })


def evaluate(corpus: Corpus, table: pl.DataFrame) -> dict[str, float]:
    dropped = (table["decision"] == "duplicate").to_list()
    planted = np.array(corpus.planted)
    drop = np.array(dropped)
    return {
        "recall": float(drop[planted].mean()) if planted.any() else 1.0,
        "base_dropped": int(drop[~planted].sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 3000, 10000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-brute-force", action="store_true",
                        help="skip the k = 1 (no blocking) comparison run")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="override a DedupParams field, e.g. --param assign_clusters=1")
    args = parser.parse_args()
    overrides = dict(item.split("=", 1) for item in args.param)
    params = DedupParams.model_validate({"seed": args.seed, **overrides})
    print(f"params: {params.model_dump()}")
    for size in args.sizes:
        corpus = make_corpus(size, args.seed)
        table = as_table(corpus)
        started = time.perf_counter()
        out = run_dedup(table, params)
        wall = time.perf_counter() - started
        meta, scores = out.meta, evaluate(corpus, out.table)
        sec = meta["seconds"]
        print(f"\nn={size}: wall {wall:.2f}s (vectorise {sec['vectorise']:.2f}, "
              f"svd {sec.get('svd', 0):.2f}, sweep {sec.get('sweep', 0):.2f} over "
              f"{len(meta['ks'])} k, near-dup {sec['near_dup']:.2f})")
        print(f"  ks {meta['ks']}")
        print(f"  inertias {[round(v, 1) for v in meta['inertias']]}")
        print(f"  chosen k {meta['chosen_k']}; clusters {meta['cluster_sizes']}; pairs compared "
              f"{meta['pairs_compared']:,} of {meta['n_unique'] * (meta['n_unique'] - 1) // 2:,}")
        print(f"  dropped: exact {meta['exact_duplicates']}, near {meta['near_duplicates']}; "
              f"planted {sum(corpus.planted)}, recall {scores['recall']:.3f}; "
              f"base prompts dropped {scores['base_dropped']}")
        if not args.no_brute_force:
            brute = params.model_copy(update={"k_min": 1, "k_max": 1, "k_points": 1})
            started = time.perf_counter()
            flat = run_dedup(table, brute)
            bscores = evaluate(corpus, flat.table)
            print(f"  no blocking (k=1): recall {bscores['recall']:.3f}, base prompts dropped "
                  f"{bscores['base_dropped']}, near-dup pass "
                  f"{flat.meta['seconds']['near_dup']:.2f}s, wall "
                  f"{time.perf_counter() - started:.2f}s")


if __name__ == "__main__":
    main()
