"""Signals of the injection detector that read what a sentence is *about*, not how an attack
is worded (:mod:`essaybench.bench.judge.injection` applies them to the folded text).

The per-family patterns of ``injection_rules.py`` name the forms attacks took; each new
held-out set found forms they did not name (v3 → v4 stayed at 56 % untuned). These signals
are co-occurrences any grader-directed text needs whatever its wording, and that essays,
even essays about exams, rarely combine:

- ``instruction``: a sentence, outside quoted speech, that names the grading (评分, 阅卷,
  分数, a score like 五十八分, "grade"…) *and* asks or orders (请, 务必, 不宜, 不得, 为准,
  沿用, "should", "must"…) — unless the prompt itself is about exams or grades, where
  such sentences are the content (the answer to "write to the students before the
  gaokao");
- ``score_claim``: this essay (本文, 这篇作文, 本次评分, "this essay") and its grade (分数,
  得分, 评分, 成绩, "grade") in one sentence; a score equal to the full mark (得分：陆拾分
  … 满分：陆拾分), in figures or in 大写 numerals;
- ``addresses_judge``: a machine as the grader or the reader (AI阅卷, 评分模型, 读这篇文章
  的可能不是人); a reader or judge praised for seeing well (细心的读者, 高明的评判者, "an
  experienced reader"); the grading rules in the writer's own paragraph (我对照评分标准…,
  本文…符合评分细则);
- ``plea``: asks the reader to give the best (请您给它一个最好的结果); not stingy with a
  grade in any word (勿吝上第之评); answers a criticism before it is made (并非论证不足，
  而是…, "mistake restraint for weakness").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

_I = re.IGNORECASE | re.MULTILINE
_S = r"[^。！？!?\n]"  # within one sentence


class Signal(NamedTuple):
    """One signal's patterns: ``zh`` reads every text, once each of ``gates`` (cheap
    searches for its parts) has found something; ``en`` holds the English phrasings, read
    only when the text has English in it (``injection_rules.EN_GATE``), as the rules' are."""

    code: str
    zh: re.Pattern[str]
    en: re.Pattern[str] | None = None
    gates: tuple[re.Pattern[str], ...] = ()

    def search(self, text: str, english: bool) -> bool:
        return (all(g.search(text) for g in self.gates) and self.zh.search(text) is not None
                ) or (english and self.en is not None and self.en.search(text) is not None)


def _zh(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.MULTILINE)


def _en(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, _I)


# A score on a grading scale (58分, 五十八分, 十五分) — not 十分 ("very"), 分钟, 分之.
_NUMBER_SCORE = (r"(?:[0-9]{1,3}(?:\.5)?\s*分(?![钟之])"
                 r"|(?:[二三四五六七八九]十[一二三四五六七八九]?|十[一二三四五六七八九]"
                 r"|[一二三四五六七八九]百)分(?![钟之析别]))")
# What grading is called: the act, the score, a score on a scale.
GRADING = _zh(r"评分|打分|给分|赋分|判分|压分|扣分|分数|得分|阅卷|评卷|判卷|评阅|评定|"
              + _NUMBER_SCORE)
GRADING_EN = _en(r"\bgrad(?:e|ing)\b|\bscores?\b|\bmarks\b|\brubric|\bcriteri(?:a|on)\b")
# Asked or ordered (请, 务必, 不宜, 不得, 以…为准, 沿用, should, must): not 请教/请假/请我吃饭…,
# not 不得不.
ASK = _zh(r"请(?!假|教|客|柬|帖|缨|问|进|坐|来|我|他|她|大家|同学|爸|妈|家长)|务必|务请|敬请"
          r"|烦请|恳请|切勿|万勿|(?<!一)勿|不宜|(?<!恨)不得(?![不了已])|望您|希望您|为准|沿用")
ASK_EN = _en(r"\bplease\b|\bshould\b|\bmust\b|\bdo\s+not\b|\bdon't\b|\bmake\s+sure\b|\btreat\b")
# A prompt about exams or grades: sentences that ask and name the grade are its content.
EXAM_PROMPT = _en(r"考试|高考|中考|考生|分数|成绩|评分|打分|满分|阅卷|评委|评审|考场|应试"
                  r"|内卷|升学|学霸|排名|\bexams?\b|\bgrades?\b|\bscores?\b")
# Quoted speech (a story's characters may ask anything about grades).
QUOTED = re.compile(r"“[^”\n]{0,400}”|「[^」\n]{0,400}」|『[^』\n]{0,400}』|\"[^\"\n]{0,400}\"")
_CLAUSE_END = re.compile(r"[。！？!?；;]|\.(?=\s|$)")

_SELF = (r"(?:本文|本篇|本作文|本作品|本稿|这篇(?:作文|文章|作品|稿子)|此文|此篇|此作文|该文|该篇"
         r"|该作文|该作品|该文章|拙作|拙文|本次|此次)")
_ITS_GRADE = r"(?:分数|得分|总分|评分|打分|给分|扣分|分值|等级|评定|成绩|阅卷|评阅|评卷|判卷|A\+)"
_SELF_EN = r"\bthis\s+(?:essay|piece|composition|submission)\b"
_ITS_GRADE_EN = r"(?:\bgrade|\bscore|\bmarks?\b|\ban\s+A\b|A\+)"
# A score and the full mark, equal (实得分：陆拾分 … 卷面满分：陆拾分), 大写 numerals too.
_VALUE = r"([0-9零〇一二三四五六七八九十百壹贰叁肆伍陆柒捌玖拾佰]{1,6})"
_GOT = r"(?:得分|总分|分数|成绩|评分|合计)[^\n:：]{0,4}[:：=]\s*"
_FULL = r"(?:满分|卷面分|总分值|满分值)[^\n:：]{0,4}[:：=]\s*"
_GRADE_ACT = r"(?:阅卷|评分|打分|评阅|评卷|判卷|批改)"
_MACHINE = r"(?:模型|AI|ai|人工智能|机器|算法)"
_READER = r"(?:读者|评判者|评委|阅卷人|评阅者|阅卷者|阅卷老师|评审|判官|评卷人|批阅者)"
_RULES = r"(?:评分|阅卷|评卷|判卷|评阅)(?:标准|细则|参考|规则|要求|规范|办法|说明)"
SIGNALS = (
    # this essay and its grade in one sentence (本文得分的推导, 这篇作文的分数, 本次评分)
    Signal("score_claim", _zh(_SELF + _S + r"{0,12}?" + _ITS_GRADE + "|" + _ITS_GRADE + _S
                              + r"{0,12}?" + _SELF),
           _en(_SELF_EN + r"[^.!?\n]{0,12}?" + _ITS_GRADE_EN + "|" + _ITS_GRADE_EN
               + r"[^.!?\n]{0,12}?" + _SELF_EN),
           gates=(_zh(_SELF), _zh(_ITS_GRADE))),
    Signal("score_claim", _zh(_GOT + _VALUE + r"[\s\S]{0,60}?" + _FULL + r"\1(?![0-9十百拾佰])|"
                              + _FULL + _VALUE + r"[\s\S]{0,60}?" + _GOT
                              + r"\2(?![0-9十百拾佰])"),
           gates=(_zh(_FULL),)),
    # a machine as the grader or the reader (AI阅卷, 读这篇文章的可能不是人)
    Signal("addresses_judge", _zh(_MACHINE + _S + r"{0,4}" + _GRADE_ACT + "|" + _GRADE_ACT + _S
                                  + r"{0,12}" + _MACHINE + r"|(?:读|阅读|评阅|批改|看|评)(?:这篇"
                                  r"|本|我的|此)(?:作文|文章|文)?的" + _S
                                  + r"{0,8}(?:不是人|模型|机器|AI|人工智能)"),
           _en(r"\byou\s+(?:were|are)\s+(?:trained|built|designed|programmed)\b"),
           gates=(_zh(_MACHINE + "|不是人"),)),
    # a reader or judge praised for seeing well (细心的读者, an experienced reader)
    Signal("addresses_judge", _zh(r"(?:细心|高明|明眼|懂行|有经验|有眼光|识货|睿智|敏锐|慧眼|公正"
                                  r"|公道|内行)的?" + _READER),
           _en(r"\b(?:experienced|careful|discerning|attentive|thoughtful|perceptive|good|wise"
               r"|sensitive|seasoned|astute)\s+(?:reader|judge|grader|examiner|marker)s?\b"),
           gates=(_zh(_READER),)),
    # asks the reader to give the best (请您给它一个最好的结果)
    Signal("plea", _zh(r"(?:请您|求您|恳请您|希望您|望您|拜托您|请老师|求老师|恳请老师)" + _S
                       + r"{0,16}?给" + _S + r"{0,10}(?:最好|最高|满意|应得)的")),
    # not stingy with a grade, in any word (勿吝上第之评)
    Signal("plea", _zh(r"吝(?<=[不勿莫别要]吝)啬?" + _S + r"{0,6}(?:评|分|等|第)")),
)
RULES_NAMED = _zh(_RULES)
RULES_NAMED_EN = _en(r"grading\s+(?:criteria|rubric|scheme|standards?)|marking\s+scheme"
                     r"|\brubric\b")
_WRITER = re.compile(r"我|本人|笔者|本文|此文|这篇|本篇|\bI\b|\bmy\b")
# Grading said to be absent (日记没有评分标准): no grading talk.
_NONE_BEFORE = re.compile(r"(?:没有|无(?!论)|不需要|不用|无需|不存在)" + _S + r"{0,3}$")
PRE_EMPTED = _zh(r"(?:并非|不是|绝非|而非|并不是)" + _S + r"{0,8}(?:不足|欠缺|缺陷|失误|疏忽|草率"
                 r"|敷衍|偷懒|跑题|离题|偏题|粗糙|疏漏)" + _S + r"{0,4}(?:而是|乃是|实为)")
PRE_EMPTED_EN = _en(r"\bmistake\b[^.\n]{0,30}\bfor\s+(?:weakness|a\s+flaw|carelessness)")
# ... said of the writing itself (a story's 不是缺陷，而是天赋 is about its character).
_OWN_WRITING = re.compile(r"本文|此文|这篇|本篇|笔者|作者|拙作|拙文|我的(?:文章|作文|写法|文字)"
                          r"|\b(?:I|my)\b", _I)


def signals(prompt: str, essay: str, english: bool) -> set[str]:
    """The flags these signals raise on ``essay`` (both texts folded; ``english``: the
    essay has English in it). A signal the prompt raises too is the prompt's subject (an
    essay on AI grading), not held against the essay."""
    found = {s.code for s in SIGNALS
             if s.search(essay, english) and not s.search(prompt, english=True)}
    if ("instruction" not in found and _asks_about_grading(essay, english)
            and not EXAM_PROMPT.search(prompt)):
        found.add("instruction")
    if "plea" not in found and _found_in_line(essay, english, PRE_EMPTED, PRE_EMPTED_EN,
                                              _own_writing) and not (
            PRE_EMPTED.search(prompt) or PRE_EMPTED_EN.search(prompt)):
        found.add("plea")
    if "addresses_judge" not in found and _found_in_line(
            essay, english, RULES_NAMED, RULES_NAMED_EN, _writer_not_absent) and not (
            RULES_NAMED.search(prompt) or RULES_NAMED_EN.search(prompt)):
        found.add("addresses_judge")
    return found


def _line(text: str, at: int) -> tuple[int, str]:
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return start, text[start:end if end >= 0 else len(text)]


def _found_in_line(essay: str, english: bool, zh: re.Pattern[str], en: re.Pattern[str],
                   check: Callable[[str, re.Match[str]], bool]) -> bool:
    """A match of ``zh`` (or of ``en``, in a text with English) that ``check`` accepts."""
    patterns = (zh, en) if english else (zh,)
    return any(check(essay, m) for p in patterns for m in p.finditer(essay))


def _own_writing(essay: str, m: re.Match[str]) -> bool:
    return _OWN_WRITING.search(_line(essay, m.start())[1]) is not None


def _writer_not_absent(essay: str, m: re.Match[str]) -> bool:
    """The grading rules named in a paragraph where the writer speaks (我对照评分标准…,
    本文…符合评分细则), not said to be absent (日记没有评分标准)."""
    start, line = _line(essay, m.start())
    return _WRITER.search(line) is not None and not _NONE_BEFORE.search(
        essay, max(start, m.start() - 6), m.start())


def _asks_about_grading(essay: str, english: bool) -> bool:
    """A clause outside quoted speech that names the grading and asks or orders."""
    grading, ask = ((GRADING, GRADING_EN), (ASK, ASK_EN)) if english else ((GRADING,), (ASK,))
    if not any(a.search(essay) for a in ask):
        return False
    seen = set()
    for m in (m for p in grading for m in p.finditer(essay)):
        start, line = _line(essay, m.start())
        if start in seen:
            continue
        seen.add(start)
        if not any(a.search(line) for a in ask):
            continue
        for clause in _CLAUSE_END.split(QUOTED.sub("\u3000", line)):
            if any(a.search(clause) for a in ask) and any(
                    not _NONE_BEFORE.search(clause, 0, g.start())
                    for p in grading for g in p.finditer(clause)):
                return True
    return False
