"""Relevance: does an essay share its prompt's topic words, or answer another question?

Measured on 3,818 answers of 20 LLMs to 204 Chinese prompts (docs/weekly.md), the whole
prompt separates own-prompt from swapped-prompt answers better (AUC 0.965) than its
material and task alone (0.924: the details of a creative request sit in what
``curate/prompt_parts`` calls requirements). The prompt's topic bigrams are the distinct
pairs of adjacent Chinese characters in it, minus the instruction vocabulary every prompt
shares (写一篇文章, 题目, 字数 …, :data:`GENERIC`). An essay's relevance is the share
of those bigrams that occur in it (0 … 1). Below the configured threshold it is flagged
``off_topic``; a prompt with no topic bigram left (e.g. "写一篇作文") cannot be
checked (``unchecked``) — neither a flag nor a pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import polars as pl

from essaybench.core.contracts import OK

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
# Bigrams of the instructions themselves, not of any topic.
GENERIC = frozenset({
    "请你", "你写", "写一", "一篇", "篇文", "文章", "写作", "作文", "题目", "目自",
    "自拟", "拟题", "标题", "字数", "数不", "不少", "少于", "于八", "八百", "百字",
    "不限", "文体", "体不", "要求", "以下", "下面", "阅读", "读下", "面的", "的材",
    "材料", "料写", "结合", "合材", "根据", "据材", "为题", "以为", "话题", "谈谈",
    "你的", "的看", "看法", "感想", "联想", "想写", "写出", "出一", "选择", "角度",
    "度写", "立意", "意自", "自定", "定文", "体裁", "裁不", "不得", "得抄", "抄袭",
    "套作", "请以", "请根", "请结", "请围", "围绕", "绕这", "这一", "一话", "要写",
    "写成", "成一",
    # genre names and "一篇X" / "写X" joins: they ask for a form, not a topic
    "篇作", "篇记", "记叙", "叙文", "篇议", "议论", "论文", "篇说", "说明", "明文",
    "篇描", "描写", "写文", "篇散", "散文", "写记", "写议", "写说", "写散", "一首",
    "首诗", "诗歌"})

Relevance = Literal["on_topic", "off_topic", "unchecked"]
SCHEMA: dict[str, type[pl.DataType]] = {
    "model": pl.Utf8, "prompt_id": pl.Utf8, "sample_index": pl.Int64,
    "relevance": pl.Float64, "relevance_status": pl.Utf8}


def han_bigrams(text: str) -> set[str]:
    """The distinct bigrams of adjacent Chinese characters (runs broken by anything else)."""
    return {run[i:i + 2] for run in _HAN.findall(text) for i in range(len(run) - 1)}


def topic_bigrams(topic_text: str) -> frozenset[str]:
    return frozenset(han_bigrams(topic_text) - GENERIC)


def relevance(prompt: str, essay: str) -> float | None:
    """The share of the topic's bigrams found in ``essay`` (None: no topic bigram)."""
    topic = topic_bigrams(prompt)
    if not topic:
        return None
    return len(topic & han_bigrams(essay)) / len(topic)


def verdict(score: float | None, threshold: float) -> Relevance:
    if score is None:
        return "unchecked"
    return "off_topic" if score < threshold else "on_topic"


@dataclass(frozen=True)
class RelevanceSummary:
    """One model's ok essays: how many were checked and how many flagged."""

    model: str
    n_checked: int
    n_off_topic: int
    n_unchecked: int
    median: float | None

    @property
    def off_topic_rate(self) -> float | None:
        return self.n_off_topic / self.n_checked if self.n_checked else None


def relevance_table(essays: pl.DataFrame, threshold: float) -> pl.DataFrame:
    """Per ok essay of a generate snapshot: its relevance to its prompt (the
    ``prompt_text`` it was sent) and its status."""
    ok = essays.filter(pl.col("status") == OK)
    rows = []
    for model, pid, sample, prompt, text in ok.select(
            "model", "prompt_id", "sample_index", "prompt_text", "essay_text").iter_rows():
        score = relevance(prompt or "", text or "")
        rows.append({"model": model, "prompt_id": pid, "sample_index": sample,
                     "relevance": score, "relevance_status": verdict(score, threshold)})
    return pl.DataFrame(rows, schema=SCHEMA)


def _median(values: pl.Series) -> float | None:
    if values.len() == 0:
        return None
    return float(values.cast(pl.Float64).median() or 0.0)  # type: ignore[arg-type]


def summarise_relevance(table: pl.DataFrame) -> list[RelevanceSummary]:
    out = []
    for model in sorted(set(table["model"].to_list())):
        rows = table.filter(pl.col("model") == model)
        status = rows["relevance_status"]
        scores = rows["relevance"].drop_nulls()
        out.append(RelevanceSummary(
            model, int((status != "unchecked").sum()), int((status == "off_topic").sum()),
            int((status == "unchecked").sum()),
            _median(scores)))
    return out
