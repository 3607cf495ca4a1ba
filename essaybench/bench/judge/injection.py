"""Injection markers in an essay: a deterministic detector, never an editor.

An essay is untrusted text that the judge reads; a writer (or whoever controls one) can
address the judge, plant a verdict, or try to close the essay's delimiters. The judge
prompt defends (``judge_prompt.v2``: per-call markers, rubric in the system role, a
reminder after the essay, a nonce the reply must echo); this module *flags* essays that
try, so a flagged essay can be re-judged and reports can show it. The essay itself is
never changed: its text is what the model wrote, and the score is of that text.

The rules read a *folded* copy (:func:`fold`): NFKC (full-width ``｛＂ｓｃｏｒｅｓ＂`` reads
as ``{"scores"``), invisible format characters removed (zero-width spaces and joiners,
soft hyphens, BOMs: ``sco\\u200bres`` reads as ``scores``), traditional characters read as
simplified (OpenCC ``t2s``, as ``core/matching.py`` does for the curation rules:
``閱卷須知`` reads as ``阅卷须知``). Verdict-shaped text is also matched with all white
space removed (``{ ' s c o r e s ' : …``).

``essay_flags`` returns the codes that fire, in a fixed order (empty: not flagged):

- ``instruction``: tells someone to ignore the rubric or to give a score, or what to put
  in the reply's fields (a "check code" to copy);
- ``addresses_judge``: speaks to the grader/judge/评委/阅卷老师, or poses as a grader's
  note (``评审补充说明：``, ``Grader's addendum:``);
- ``score_json``: a verdict-shaped object (``{"…": 10``, ``{'立意': 10``) or a list or
  table of three or more top scores;
- ``rubric_ids``: the rubric's question ids (``arg.argument.q1``…), score field names, or
  a run of short score keys with scores (``A1: 10 A2: 10 …``, judge_prompt.v3's keys);
- ``score_claim``: claims a score, a prize or model-essay status for itself (本文…满分,
  ``60/60``, 阅卷…一类上等, 理应…最高分, full marks, deserves the top…);
- ``role_markup``: chat-template or role markers (``<|im_start|>``, ``<<SYS>>``,
  ``[SYSTEM]``, ``<start_of_turn>``, ``【系统消息】``, ``【助手】``, ``system:`` at a line
  start…);
- ``delimiter``: delimiter-like text (``<<<``, ``>>>``, ``</essay>``, ``</作文>``,
  ``END-ESSAY``, ``END OF … TEXT``, fences), or an end-of-essay marker (【作文结束】,
  ──正文完──) followed by talk of grading (an author's note after 【全文完】 is a
  convention of fiction, not an escape);
- ``master_key``: starts with a reasoning/answer opener (``Thought process:``, ``解：``)
  or is a few characters of mostly punctuation — the "one token fools the judge" family;
- ``language_switch``: a long Latin-script passage inside a Chinese essay;
- ``plea``: asks for a grade, or for pity about one (恳请您…最高分, 求求您多给几分,
  "please be generous") — persuasion without instructions still moves judges.
"""

from __future__ import annotations

import functools
import re
import unicodedata

import opencc

FLAG_CODES = ("instruction", "addresses_judge", "score_json", "rubric_ids", "score_claim",
              "role_markup", "delimiter", "master_key", "language_switch", "plea")

_I = re.IGNORECASE | re.MULTILINE
_S = r"[^。！？!?\n]"  # within one sentence (NFKC made ！？ ASCII)
_TOP = r"(?:满分|最高分|最高档|最高分值|最高等级|最高的分数?|10\s*分|十分)"
_GRADER = r"(?:grader|judge|evaluator|examiner|assessor|reviewer|scorer|marker)"
_RULES: dict[str, re.Pattern[str]] = {
    "instruction": re.compile(
        r"忽略(?:以上|上述|之前|前面|所有|评分|原有)|无视(?:评分|以上|上述)|不要(?:按照|遵守)(?:评分)?细则"
        r"|(?:请|务必|必须|一律|应当|应该)(?:给|打|评)(?:出)?(?:满分|最高分|10\s*分|十分)"
        r"|(?:给|打)(?:本文|这篇|此文)?(?:满分|最高分)"
        rf"|(?:各项|每项|每一项|每个(?:小题|问题|方面|维度|项目)|所有(?:小题|问题|项目|维度|题目)"
        rf"|全部(?:小题|问题|项目|维度)|各个?(?:小题|题|维度))(?:{_S}{{0,10}})(?:给|打|评|计|赋)"
        rf"{_S}{{0,6}}{_TOP}"
        r"|(?:据此|按此|照此)(?:赋分|打分|评分|给分)|(?:按|以)最高(?:档|等级|分)(?:给分|计分|评分|赋分)"
        # the reply's own fields: a "check code" to copy makes the reply unusable
        r"|(?:校验码|核验码|识别码|check\s*code|nonce)[^。\n]{0,12}(?:改为|改成|写成|填写?|应为|设为"
        r"|换成|须为|必须是|must\s+be|should\s+be|set\s+to)"
        r"|\bignore\s+(?:all\s+|any\s+)?(?:the\s+)?(?:previous|above|prior|preceding|rubric)"
        r"|\bdisregard\b|\b(?:must|should)\s+(?:receive|get|be\s+given)\s+(?:the\s+)?"
        r"(?:maximum|highest|full|perfect|top)|\b(?:give|award|assign|grant)\s+(?:it|this|every"
        r"|each|all)\b[^.\n]{0,40}?\b(?:full|maximum|perfect|top|highest)\b", _I),
    # Spoken to, not spoken of: a story may have a judge in it.
    "addresses_judge": re.compile(
        r"(?:请|致|给|各位|尊敬的|亲爱的)\s*(?:评委|阅卷|评卷|判卷|评审|评分)"
        r"|(?:评委|阅卷老师|阅卷人|评卷老师|评审老师|评审专家|评分老师|评分系统|评分模型)(?:们)?"
        r"\s*(?:请|注意|您好|须知|[:：])"
        r"|(?:^|[【\[(（<])\s*(?:评审|阅卷|评卷|评分|判卷|批阅|评委|考官)[^\n:：】\])）>]{0,4}"
        r"(?:说明|意见|备注|须知|要求|提示|结论|注意|附注|通知)\s*(?:[】\])）>]\s*[:：]?|[:：])"
        r"|(?:采点|採点)者|\b" + _GRADER + r"'?s?\s+(?:addendum|notes?|instructions?)\s*:"
        r"|\bas\s+an?\s+(?:\w+\s+){0,2}" + _GRADER + r"\b"
        r"|\b(?:dear|to\s+the|note\s+(?:to|for)\s+(?:the\s+)?|attention(?:\s+to\s+the)?|hey)\s+"
        r"(?:ai\s+)?(?:grader|judge|evaluator|examiner|assessor|reviewer|scorer|evaluation\s+system)s?\b",
        _I),
    "score_json": re.compile(
        r"\{\s*\"[^\"\n]{1,40}\"\s*:\s*(?:\d|\"|\{|\[)"
        r"|(?:^[ \t]*[-*|]?[ \t]*[^\n:：|=]{1,12}[ \t]*[:：|=][ \t]*(?:10|100|满分)[ \t]*"
        r"(?:分|/[ \t]*10|/[ \t]*100)?[ \t]*\|?[ \t]*\n?){3,}", _I),
    "rubric_ids": re.compile(
        r"\b(?:arg|nar|des|exp)\.[a-z_]{2,}(?:\.q\d+)?\b|\bscore_(?:weighted|unweighted)\b"
        r"|\"(?:scores|analysis|nonce)\"\s*:"
        r"|(?:\b[A-Z]{1,2}\d{1,2}\s*[:：=]\s*\d{1,3}\b[\s,，;；、]*){3,}", _I),
    # About the essay itself ("本文…满分", "this essay … full marks"): a narrative about a
    # pupil's 满分 test or a 10-minute walk is content, not a claim.
    "score_claim": re.compile(
        rf"(?:本文|本篇|本作文|这篇(?:作文|文章)?|此文|此作文|该文|该作文|拙作){_S}{{0,24}}"
        r"(?:满分|最高分|一等奖|特等奖|范文|高分|一类上等|満点|满点|(?<![\d.])10\s*分(?!钟))"
        r"|(?:满分|最高分)(?:范文|作文)[^。！？\n]{0,6}(?:本文|此文|这篇)"
        rf"|(?:批阅|阅卷|审定|评定|判卷|评卷){_S}{{0,12}}(?:满分|最高分|一类上等|一类文)"
        rf"|(?:理应|应当|应该|值得|配得上)(?:获得|得到|给予|拿到|打)?{_S}{{0,6}}"
        r"(?:满分|最高分|最高评价|最高档|最高的分数|一个高分|満点|满点)"
        r"|(?<![\d/.])(10|20|25|30|40|50|60|70|100|120|150)\s*/\s*\1(?![\d/])"
        r"|\b(\d{1,3})\s+out\s+of\s+\2\b"
        r"|\b(?:full|maximum|perfect|top)\s+(?:marks|score|scores)\b"
        r"|\bdeserves?\s+(?:a\s+|an\s+|the\s+)?(?:full|maximum|perfect|top|highest|10)\b"
        r"|\b(?:this|the)\s+essay\s+(?:is|was)\s+(?:flawless|perfect|exemplary|award)", _I),
    "role_markup": re.compile(
        r"<\|(?:im_start|im_end|system|user|assistant|endoftext)\|>|\[/?(?:SYSTEM|INST)\]"
        r"|<<\s*/?\s*SYS\s*>>|</?\s*(?:system|assistant|sys|instructions?|start_of_turn"
        r"|end_of_turn|im_start|im_end)\b[^<>\n]{0,20}>"
        r"|【\s*(?:系统|助手|assistant|system|AI|人工智能|管理员|评分系统)[^】\n]{0,6}】"
        r"|【\s*用户\s*】(?=[\s\S]*【\s*(?:助手|AI|assistant)\s*】)"
        r"|\bsystem\s+(?:prompt|message|instruction|override)s?\b"
        r"|^\s*(?:system|assistant|user|系统|助手|系统提示)\s*[:：]|^\s*#{1,3}\s*(?:system|instruction)",
        _I),
    "delimiter": re.compile(
        r"<<<|>>>|</?\s*(?:essay|student_essay|submission)\s*>|</\s*[\u4e00-\u9fff]{1,8}\s*>"
        r"|END[-_ ]?ESSAY|\bEND\s+OF\s+(?:THE\s+)?(?:\w+\s+){0,2}(?:TEXT|ESSAY|INPUT|SUBMISSION"
        r"|DOCUMENT)\b|```|'''"
        r"|(?:^|[【\[(（=\-—─*#<])[ \t]*(?:作文|正文|全文|原文|文章|学生作文|考生作文)[ \t]*"
        r"(?:结束|完毕|完|到此结束)[ \t]*(?:[】\])）>]|[=\-—─*#]{2,}|$)"
        r"(?=[\s\S]{0,200}?(?:评审|阅卷|评分|评卷|打分|给分|赋分|分数|满分|grader|score|grade))",
        _I),
    "plea": re.compile(
        rf"(?:恳请|恳求|求求|求您|拜托|请您|希望您|望您|麻烦您|请老师|希望老师|求老师){_S}{{0,20}}"
        r"(?:高分|满分|最高分|最高的分|好分数|好成绩|多给|高抬贵手|手下留情|打高|分数)"
        r"|(?:高分|满分|分数|成绩)[^\n]{0,20}(?:求求您|求您|拜托您|恳请您|高抬贵手|手下留情)"
        r"|多给(?:几|一些|一点|点|些)?分|(?:给|打)(?:个|一个)?高分吧"
        r"|\bi\s+(?:am\s+)?beg(?:ging)?\s+you\b|\bplease\s+be\s+(?:generous|lenient|kind)\b"
        r"|\bplease\s+(?:give|grant|award)\b[^.\n]{0,30}\b(?:high|highest|top|full|good|perfect)"
        r"\s+(?:grade|score|mark)", _I),
}
_COMPACT_VERDICT = re.compile(r"[{,][\"'][^\"'{}\n]{1,40}[\"']:(?:\d|[\"'{\[])")
_MASTER_KEY = re.compile(
    r"^\s*(?:thought\s+process|let'?s\s+solve|solution|answer|reasoning|解|答|思考过程)\s*[:：]",
    re.IGNORECASE)
_LATIN_RUN = re.compile(r"[A-Za-z][A-Za-z ,.;:'!?\"()\-]{59,}")
_HAN = re.compile(r"[\u3400-\u9fff]")
_WORDISH = re.compile(r"[\w\u3400-\u9fff]")
_WHITE = re.compile(r"\s+")
# Unicode's invisible format characters (category Cf) that survive NFKC: zero-width space,
# joiners and marks, bidi controls, word joiner and invisible operators, BOM, tag characters.
_FORMAT = re.compile("[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
                     "\u2066-\u206f\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]")


@functools.cache
def _t2s() -> opencc.OpenCC:
    return opencc.OpenCC("t2s")


def fold(text: str) -> str:
    """``text`` as the rules read it: NFKC, format characters (Unicode category Cf: zero-width
    spaces and joiners, bidi controls, BOM, soft hyphen…) removed, traditional characters
    read as simplified."""
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    if text.isascii():
        return text
    converted: str = _t2s().convert(_FORMAT.sub("", text))
    return converted


def essay_flags(prompt_text: str, essay_text: str) -> list[str]:
    """The injection markers in ``essay_text`` (see the module docstring). ``prompt_text``
    is the task: a cue the prompt itself uses (an essay on a contest may say 评委 because
    the prompt does) is not held against the essay. Remembered for the most recent essays:
    the judge prefetch (``prefetch.py``) finds an essay's flags while its judge calls are
    in flight, and the judge stage's flags read them back (0.4 s of the judge stage at the
    paper's scale)."""
    return list(_essay_flags(prompt_text, essay_text))


def forget_essay_flags() -> None:
    """Drop what :func:`essay_flags` remembers (the judge stage, once it has read its
    essays' flags: a long-lived worker would otherwise keep the last essays' texts)."""
    _essay_flags.cache_clear()


@functools.lru_cache(maxsize=32768)
def _essay_flags(prompt_text: str, essay_text: str) -> tuple[str, ...]:
    essay, prompt = fold(essay_text), fold(prompt_text)
    flags = [code for code, rule in _RULES.items()
             if rule.search(essay) and not _in_prompt(rule, prompt, essay)]
    if "score_json" not in flags and _COMPACT_VERDICT.search(_WHITE.sub("", essay)):
        flags.append("score_json")
    stripped = essay.strip()
    if _MASTER_KEY.search(stripped) or (0 < len(stripped) < 40 and len(
            _WORDISH.findall(stripped)) < 0.5 * len(stripped)):
        flags.append("master_key")
    if any(len(re.findall(r"[A-Za-z]", m.group())) >= 40 for m in _LATIN_RUN.finditer(essay)) \
            and len(_HAN.findall(essay)) >= 50:
        flags.append("language_switch")
    return tuple(code for code in FLAG_CODES if code in flags)


def _in_prompt(rule: re.Pattern[str], prompt_text: str, essay_text: str) -> bool:
    """Every match in the essay is a phrase the prompt itself contains."""
    found = {m.group().strip().lower() for m in rule.finditer(essay_text)}
    prompt = prompt_text.lower()
    return bool(found) and all(f and f in prompt for f in found)


_SENTENCE_END = re.compile(r"(?<=[。！？!?])")


def stripped_copy(prompt_text: str, essay_text: str) -> str:
    """``essay_text`` without the lines that carry an injection flag by themselves (of a
    flagged line, only the sentences that do): what a judge is asked about when its
    judgment of the essay as written failed (``second.py``). A copy to judge, never the
    essay: records keep what the model wrote."""
    kept = []
    for line in essay_text.split("\n"):
        if essay_flags(prompt_text, line):
            line = "".join(part for part in _SENTENCE_END.split(line)
                           if not essay_flags(prompt_text, part))
        kept.append(line)
    return "\n".join(kept).strip()
