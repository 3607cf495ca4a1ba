"""Person names in a user's request: a surname and one or two given-name characters that
the text introduces as someone's (``我叫张伟``, ``我女儿王梓涵``, ``李娜老师``), and names
jieba's part-of-speech tagger marks as a person (``nr``) that its dictionary does not know
as a well-known one.

Why both, and why not jieba alone (measured in ``benchmarks/deid.py``): jieba tags
public figures in essay material as persons too (鲁迅, 李白, 苏轼, 袁隆平 are in its
dictionary with high frequencies), and it cuts unseen names short (王梓涵 → 王梓) or
misses compound surnames (欧阳子轩 → 子轩). The cue words and surnames are data:
``rubrics/filters/personal_data.v1.yaml``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

import jieba

from essaybench.core.paths import resource
from essaybench.core.yamlio import read_yaml
from essaybench.curate.pii.formatted import Span

# A name jieba's dictionary counts more often than this is a well-known person's
# (鲁迅 1507, 李白 374, 袁隆平 44), not a private one (张伟 0, 李小明 6, 陈建国 3).
WELL_KNOWN_FREQ = 20
# A name before a title (李娜老师) is someone's only where the clause is about the user's
# own people: it says 我/我们/你/您/孩子 …
_PERSONAL = re.compile(r"我|咱|你|您|孩子|儿子|女儿|家长|班上|班里|联系|电话|微信")
_CLAUSE_END = re.compile(r"[。！？!?；;\n]")


def _clause_bounds(text: str, at: int) -> tuple[int, int]:
    starts = [m.end() for m in _CLAUSE_END.finditer(text, 0, at)]
    end = _CLAUSE_END.search(text, at)
    return (starts[-1] if starts else 0), (end.start() if end else len(text))


def _clause(text: str, at: int) -> str:
    start, end = _clause_bounds(text, at)
    return text[start:end]


_NOT_A_NAME_END = frozenset("在的是了和与说写给把被也都就又还要会让从向对为着过等")
_CUE_GAP = r"(?:[叫是名为:：\s]{0,3}|[，,、 ]?)"  # 我女儿叫王梓涵 / 我女儿，王梓涵 / 姓名：张伟


@dataclass(frozen=True)
class NameRules:
    before: re.Pattern[str]
    intro: re.Pattern[str]
    after: re.Pattern[str]
    surnames: frozenset[str]
    titles: tuple[str, ...]


@cache
def name_rules(version: str = "v1") -> NameRules:
    data = read_yaml(resource("rubrics") / "filters" / f"personal_data.{version}.yaml",
                     "personal data rules").data
    compound = [str(s) for s in data["compound_surnames"]]
    single = sorted({ch for ch in str(data["surnames"]) if not ch.isspace()})
    surname = "(?:" + "|".join(map(re.escape, compound)) + "|[" + "".join(single) + "])"
    given = r"[\u4e00-\u9fff]{1,2}"
    before = "|".join(map(re.escape, sorted(data["name_cues_before"], key=len, reverse=True)))
    after = "|".join(map(re.escape, sorted(data["name_cues_after"], key=len, reverse=True)))
    intro = "|".join(map(re.escape, data["self_introductions"]))
    return NameRules(
        before=re.compile(rf"(?:{before}){_CUE_GAP}(?P<name>{surname}{given})"),
        intro=re.compile(rf"(?:{intro})[^，。,.！？!?\s]{{0,10}}的(?P<name>{surname}{given})"),
        after=re.compile(rf"(?P<name>{surname}[\u4e00-\u9fff]{{1,2}}?)(?:{after})"),
        surnames=frozenset([*compound, *single]),
        titles=tuple(str(t) for t in data["name_cues_after"]))


@dataclass(frozen=True)
class _Token:
    start: int
    end: int
    word: str
    person: bool  # jieba tagged it nr*


def _tokens(text: str, at: int = 0) -> list[_Token]:
    """jieba's words of ``text`` with their offsets (``at``: where ``text`` starts)."""
    import jieba.posseg as pseg  # its tagger's tables (~0.8 s): loaded where names are sought

    out = []
    for word, flag in pseg.cut(text):
        out.append(_Token(at, at + len(word), word, flag.startswith("nr")))
        at += len(word)
    return out


def _well_known(word: str) -> bool:
    return (jieba.dt.FREQ.get(word) or 0) > WELL_KNOWN_FREQ


def _every_match(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """Matches starting at every position (finditer skips one that overlaps a match that
    was no name: 我是初二3班的张雨涵 first matches 我是 + 初二)."""
    pos = 0
    while (m := pattern.search(text, pos)) is not None:
        yield m
        pos = m.start() + 1


def _common_word(given: str) -> bool:
    """The given name holds an everyday word (向语文: 语文; 常说话: 说话)."""
    return any((jieba.dt.FREQ.get(given[i:j]) or 0) > 100
               for i in range(len(given)) for j in range(i + 2, len(given) + 1))


def _cued(text: str, rules: NameRules) -> list[Span]:
    """Names after or before a cue: the longest candidate (surname + 1–2 characters) that
    starts and ends on jieba's word boundaries and holds a word jieba tags as a person, or,
    for three or more characters, is no dictionary word and holds no everyday word (jieba
    tags no person in 欧阳梓萱 or 东方强): 我女儿叫王梓涵 gives 王梓涵 while 同学关系 (关 is
    a surname) and 学生时代 give none. jieba reads only the clauses a cue matched in (most
    records have none: the tagger is what costs)."""
    clauses: dict[int, list[_Token]] = {}
    found = []
    for pattern in (rules.before, rules.intro, rules.after):
        for m in _every_match(pattern, text):
            begin = m.start("name")
            if pattern is rules.after and not _PERSONAL.search(_clause(text, begin)):
                continue  # 写一篇关于张桂梅老师的作文: a public figure, not someone's
            first, last = _clause_bounds(text, begin)
            if first not in clauses:
                clauses[first] = _tokens(text[first:last], first)
            tokens = clauses[first]
            starts, ends = {t.start for t in tokens}, {t.end for t in tokens}
            for end in range(m.end("name"), begin + 1, -1):
                name = text[begin:end]
                if end - begin > 2 and name[-1] in _NOT_A_NAME_END:
                    continue  # 高三学生王喆在作文中: 王喆, not 王喆在
                if begin not in starts or end not in ends or _well_known(name):
                    continue
                if any(t.person and t.start < end and begin < t.end for t in tokens) or (
                        end - begin >= 3 and name not in jieba.dt.FREQ
                        and not _common_word(text[begin + 1:end])):
                    found.append(Span(begin, end, "name"))
                break
    return found


def _tagged(rules: NameRules, tokens: list[_Token]) -> list[Span]:
    return [Span(t.start, t.end, "name") for t in tokens
            if t.person and 2 <= len(t.word) <= 4
            and (t.word[0] in rules.surnames or t.word[:2] in rules.surnames)
            and not _well_known(t.word) and not t.word.endswith(rules.titles)]


@cache
def _quiet_jieba() -> None:
    # Once: setLevel clears every logger's cache (Prefect's many), 60 µs a record.
    jieba.setLogLevel(logging.WARNING)


def name_spans(text: str, *, tagger: bool = False) -> list[Span]:
    """Names in ``text`` introduced by a cue; with ``tagger``, also every person jieba tags
    that its dictionary does not know well (measured: on the bundled sample prompts it
    masks 高中语文, 成果展, 古人云, 孔融让梨 …, so it is off by default)."""
    _quiet_jieba()
    rules = name_rules()
    spans = _cued(text, rules) + (_tagged(rules, _tokens(text)) if tagger else [])
    merged: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        if merged and span.start < merged[-1].end:
            last = merged[-1]
            merged[-1] = Span(last.start, max(last.end, span.end), "name")
        else:
            merged.append(span)
    return merged
