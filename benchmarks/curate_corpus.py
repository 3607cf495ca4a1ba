"""A generated chat log for the curate benchmark, with its answer key.

Essay requests (45% of the records) are built from parts, so their wording really
varies: ``rouge_prune.varied_prompt`` (openings × context × task × length × a random
subset of ~40 requirements × material sentences × closings, exam-style and chat-style)
for 60% of the new prompts, ``dedup_kmeans``'s template × topic prompts with a length
and often a requirement clause for 40%. Of the essay records (rates in ``RATES``):

- ``exact``: an earlier prompt asked again, half of them verbatim and half with noise
  that normalisation removes (full-width digits, a doubled space, a zero-width space);
- ``near``: an earlier prompt reworded by 1–2 small edits that keep the request (a
  polite prefix or suffix, a synonym, a dropped or swapped clause);
- ``rouge_hi`` / ``rouge_lo``: an earlier prompt edited in substance (another
  requirement, topic, person or event) until its ROUGE-L F with the original, computed
  exactly as the rouge stage does, lies in [0.70, 0.78) or [0.62, 0.70);
- ``base``: a new prompt.

A copy always comes after its original in the file. The rest of the log is other chat
requests (45%: code, translation, recipes, letters, poems, greetings …), two-turn
conversations in the ``messages`` form (7%) and broken lines (3%). Seeded: one seed,
one file.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from benchmarks import dedup_kmeans as dk
from benchmarks import rouge_prune as rp
from essaybench.curate.normalize import normalize_text
from essaybench.curate.rouge import rouge_l_pair
from essaybench.curate.segment import Segmenter

RATES = {"exact": 0.12, "near": 0.12, "rouge_hi": 0.01, "rouge_lo": 0.01}
ROUGE_BANDS = {"rouge_hi": (0.70, 0.78), "rouge_lo": (0.62, 0.70)}
SHARES = {"essay": 0.45, "other": 0.45, "conversation": 0.07}  # broken: the rest

OTHER_REQUESTS = [
    "把这句话翻译成英文：{t}是我们每个人都需要的。", "{t}用英语怎么说？",
    "用Python写一个函数，找出{n}以内的所有质数", "帮我写一段SQL，统计每个班{t}得分前{m}名",
    "{t}怎么做才好吃？需要准备哪些材料", "推荐{m}本关于{t}的书", "明天{city}会下雨吗",
    "帮我算一下{n}乘以{m}等于多少", "给我讲一个关于{t}的笑话", "写一首关于{t}的七言绝句",
    "帮我给{p}写一封感谢信，{n}字左右", "帮我写一份以{t}为主题的班会活动方案",
    "写一条关于{t}的朋友圈文案，{m}个字以内", "帮我把下面这段话改得通顺一点：{t}很重要，我们要{t}",
    "{city}有哪些好玩的地方？玩{m}天怎么安排", "你好，你是谁", "谢谢", "在吗",
    "解释一下什么是{t}，用{m}句话", "帮我写{m}条{t}的标语",
]
OTHER_TOPICS = ["诚信", "环保", "垃圾分类", "人工智能", "读书", "运动", "理想", "友谊",
                "节约用水", "安全", "感恩", "坚持", "时间管理", "科技", "传统文化", "红烧肉",
                "饺子", "番茄炒蛋"]
OTHER_PEOPLE = ["班主任", "妈妈", "同学", "邻居", "医生", "老校长"]
CITIES = ["北京", "上海", "杭州", "成都", "西安", "广州"]

# Rewordings that keep the request (near duplicates).
PREFIXES = ["请", "帮我", "麻烦你，", "老师布置了作业：", "急！", "你好，"]
SUFFIXES = ["谢谢！", "辛苦了。", "尽快给我。", "（初中）", "写得好一点哦。"]
SYNONYMS = [("写一篇", "撰写一篇"), ("不少于", "至少"), ("左右", "上下"), ("要求", "需要"),
            ("题目", "标题"), ("文章", "作文"), ("谈谈", "说说"), ("感受", "体会"),
            ("描写", "描绘"), ("介绍", "讲解"), ("清晰", "清楚"), ("。", "！"), ("请", "请你")]
# Substantive edits (ROUGE-L pairs): swap one of these for another of the same list.
SUBSTANCE = [rp.REQUIREMENTS, rp.TOPICS, rp.PEOPLE, rp.EVENTS, rp.GENRES,
             dk.ABSTRACT, dk.SCENES, dk.THINGS, dk.BOOKS, dk.EVENTS, dk.PEOPLE]


@dataclass(frozen=True)
class Planted:
    """An essay record of the log: its role, the record it copies (or None) and, for a
    ROUGE-L pair, the F computed when it was made."""

    role: str  # base | exact | near | rouge_hi | rouge_lo
    of: str | None
    f: float | None = None


@dataclass(frozen=True)
class ChatLog:
    path: Path
    records: int
    essays: dict[str, Planted]  # JSONL id -> what it is


def template_prompt(rng: random.Random) -> str:
    template, topics = dk.TEMPLATES[rng.randrange(len(dk.TEMPLATES))]
    text = template.format(t=rng.choice(topics), n=rng.choice(dk.LENGTHS))
    if rng.random() < 0.7:
        text = text.rstrip("。") + "，" + rp.requirements(rng) + "。"
    return text


def new_prompt(rng: random.Random) -> str:
    return rp.varied_prompt(rng) if rng.random() < 0.6 else template_prompt(rng)


def with_noise(text: str, rng: random.Random) -> str:
    """``text`` as another client sent it: the same after normalisation."""
    digits = str.maketrans("0123456789", "０１２３４５６７８９")
    noisy = [text.translate(digits), text.replace("，", "， ", 1).replace("，", "，  ", 1),
             text[:3] + "\u200b" + text[3:], "  " + text + "\n"][rng.randrange(4)]
    return noisy if normalize_text(noisy) == normalize_text(text) else text


def reword(text: str, rng: random.Random) -> str:
    """1–2 small edits that keep the request."""
    out = text
    for _ in range(rng.randint(1, 2)):
        op = rng.randrange(5)
        if op == 0:
            out = rng.choice(PREFIXES) + out
        elif op == 1:
            out = out + rng.choice(SUFFIXES)
        elif op == 2:
            found = [(a, b) for a, b in SYNONYMS if a in out]
            if found:
                a, b = rng.choice(found)
                out = out.replace(a, b, 1)
        else:  # drop or swap a clause that is neither the first nor the last
            clauses = out.split("，")
            if len(clauses) >= 4:
                i = rng.randrange(1, len(clauses) - 2)
                if op == 3:
                    del clauses[i]
                else:
                    clauses[i], clauses[i + 1] = clauses[i + 1], clauses[i]
                out = "，".join(clauses)
    return out if out != text else "请" + text


class RougePairs:
    """Variants of a prompt whose ROUGE-L F with it lies in a given band."""

    def __init__(self) -> None:
        self.segmenter = Segmenter()

    def f(self, a: str, b: str) -> float:
        tokens = self.segmenter.rouge_tokens
        return rouge_l_pair(tokens(normalize_text(a)), tokens(normalize_text(b)))

    def variant(self, text: str, band: tuple[float, float], rng: random.Random,
                tries: int = 6) -> tuple[str, float] | None:
        for _ in range(tries):
            out = text
            for _ in range(12):
                out = self._edit(out, rng)
                f = self.f(text, out)
                if band[0] <= f < band[1]:
                    return out, f
                if f < band[0]:
                    break
        return None

    @staticmethod
    def _edit(text: str, rng: random.Random) -> str:
        present = [(words, w) for words in SUBSTANCE for w in words if len(w) >= 2 and w in text]
        if present and rng.random() < 0.8:
            words, w = rng.choice(present)
            return text.replace(w, rng.choice([x for x in words if x != w]), 1)
        return text.rstrip("。！") + "，" + rng.choice(rp.REQUIREMENTS) + "。"


def _essays(n: int, rng: random.Random) -> tuple[list[str], dict[str, Planted]]:
    texts: list[str] = []
    planted: dict[str, Planted] = {}
    bases: list[int] = []  # indices of texts that are new prompts
    seen: set[str] = set()
    pairs = RougePairs()
    roles = list(RATES)
    cuts = [sum(RATES[r] for r in roles[: i + 1]) for i in range(len(roles))]

    def add(text: str, p: Planted) -> None:
        planted[f"e{len(texts)}"] = p
        texts.append(text)

    def fresh() -> None:
        for _ in range(50):
            text = new_prompt(rng)
            if text not in seen:
                break
        seen.add(text)
        bases.append(len(texts))
        add(text, Planted("base", None))

    makers: dict[str, Callable[[str], tuple[str, float | None] | None]] = {
        "exact": lambda t: (with_noise(t, rng) if rng.random() < 0.5 else t, None),
        "near": lambda t: (reword(t, rng), None),
        "rouge_hi": lambda t: pairs.variant(t, ROUGE_BANDS["rouge_hi"], rng),
        "rouge_lo": lambda t: pairs.variant(t, ROUGE_BANDS["rouge_lo"], rng),
    }
    while len(texts) < n:
        u = rng.random()
        role = next((r for r, c in zip(roles, cuts, strict=True) if u < c), "base")
        if role == "base" or not bases:
            fresh()
            continue
        src = bases[rng.randrange(len(bases))]
        made = makers[role](texts[src])
        if made is None or (role != "exact" and made[0] in seen):
            fresh()
            continue
        if role != "exact":
            seen.add(made[0])
        add(made[0], Planted(role, f"e{src}", made[1]))
    return texts, planted


def _other(rng: random.Random) -> str:
    return rng.choice(OTHER_REQUESTS).format(
        t=rng.choice(OTHER_TOPICS), p=rng.choice(OTHER_PEOPLE), city=rng.choice(CITIES),
        n=rng.randrange(10, 2000), m=rng.randrange(2, 11))


def dump(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False)


def write_chat_log(path: Path, records: int, seed: int) -> ChatLog:
    """Write the log (see the module docstring) and return its answer key."""
    rng = random.Random(seed)
    n_conv = round(records * SHARES["conversation"] / 2)  # two user turns, two records
    n_essay, n_other = (round(records * SHARES[k]) for k in ("essay", "other"))
    n_broken = records - n_essay - n_other - 2 * n_conv
    essays, planted = _essays(n_essay, rng)
    rest = [dump({"id": f"o{i}", "query": _other(rng)}) for i in range(n_other)]
    for i in range(n_conv):
        rest.append(dump({"id": f"c{i}", "messages": [
            {"role": "system", "content": "你是一个写作助手。"},
            {"role": "user", "content": rng.choice(essays)},
            {"role": "assistant", "content": "好的，下面是一篇范文……"},
            {"role": "user", "content": "再写长一点"}]}))
    for i in range(n_broken):
        rest.append(f'{{"id": "b{i}", "query": "写一篇' if i % 2 else
                    dump({"id": f"b{i}", "text": "字段名不对"}))
    rng.shuffle(rest)
    # Essays keep their order (a copy after its original); the rest fills random slots.
    lines = n_essay + len(rest)  # a conversation is one line, two records
    slots = set(rng.sample(range(lines), n_essay))
    ei = ri = 0
    with path.open("w", encoding="utf-8") as out:
        for k in range(lines):
            if k in slots:
                out.write(dump({"id": f"e{ei}", "query": essays[ei]}) + "\n")
                ei += 1
            else:
                out.write(rest[ri] + "\n")
                ri += 1
    return ChatLog(path, records, planted)
