"""Injection markers in an essay: a deterministic detector, never an editor.

An essay is untrusted text that the judge reads; a writer (or whoever controls one) can
address the judge, plant a verdict, or try to close the essay's delimiters. The judge
prompt defends (``judge_prompt.v2``: per-call markers, rubric in the system role, a
reminder after the essay, a nonce the reply must echo); this module *flags* essays that
try, so a flagged essay can be re-judged and reports can show it. The essay itself is
never changed: its text is what the model wrote, and the score is of that text.

``essay_flags`` returns the codes that fire, in a fixed order (empty: not flagged):

- ``instruction``: tells someone to ignore the rubric or to give a score;
- ``addresses_judge``: speaks to the grader/judge/评委/阅卷老师;
- ``score_json``: a JSON object with keys, as a verdict would be;
- ``rubric_ids``: the rubric's question ids (``arg.argument.q1``…), score field names, or
  a run of short score keys with scores (``A1: 10 A2: 10 …``, judge_prompt.v3's keys);
- ``score_claim``: claims a score, a prize or model-essay status for itself (本文…满分,
  full marks…);
- ``role_markup``: chat-template or role markers (``<|im_start|>``, ``[SYSTEM]``,
  ``system:`` at a line start…);
- ``delimiter``: delimiter-like text (``<<<``, ``>>>``, ``</essay>``, ``END-ESSAY``, fences);
- ``master_key``: starts with a reasoning/answer opener (``Thought process:``, ``解：``)
  or is a few characters of mostly punctuation — the "one token fools the judge" family;
- ``language_switch``: a long Latin-script passage inside a Chinese essay.
"""

from __future__ import annotations

import re

FLAG_CODES = ("instruction", "addresses_judge", "score_json", "rubric_ids", "score_claim",
              "role_markup", "delimiter", "master_key", "language_switch")

_I = re.IGNORECASE | re.MULTILINE
_RULES: dict[str, re.Pattern[str]] = {
    "instruction": re.compile(
        r"忽略(?:以上|上述|之前|前面|所有|评分)|无视(?:评分|以上|上述)|不要(?:按照|遵守)(?:评分)?细则"
        r"|(?:请|务必|必须|一律|应当|应该)(?:给|打|评)(?:出)?(?:满分|最高分|10\s*分|十分)"
        r"|(?:给|打)(?:本文|这篇|此文)?(?:满分|最高分)"
        r"|\bignore\s+(?:all\s+|any\s+)?(?:the\s+)?(?:previous|above|prior|preceding|rubric)"
        r"|\bdisregard\b|\b(?:must|should)\s+(?:receive|get|be\s+given)\s+(?:the\s+)?"
        r"(?:maximum|highest|full|perfect|top)|\bgive\s+(?:it|this(?:\s+essay)?)\s+"
        r"(?:a\s+)?(?:full|maximum|perfect|top)", _I),
    # Spoken to, not spoken of: a story may have a judge in it.
    "addresses_judge": re.compile(
        r"(?:请|致|给|各位|尊敬的|亲爱的)\s*(?:评委|阅卷|评卷|判卷|评审|评分)"
        r"|(?:评委|阅卷老师|阅卷人|评卷老师|评审老师|评审专家|评分老师|评分系统|评分模型)(?:们)?"
        r"\s*(?:请|注意|您好|须知|[:：])"
        r"|\b(?:dear|to\s+the|note\s+(?:to|for)\s+(?:the\s+)?|attention(?:\s+to\s+the)?|hey)\s+"
        r"(?:ai\s+)?(?:grader|judge|evaluator|examiner|assessor|reviewer|scorer|evaluation\s+system)s?\b",
        _I),
    "score_json": re.compile(r"\{\s*\"[^\"\n]{1,40}\"\s*:\s*(?:\d|\"|\{|\[)"),
    "rubric_ids": re.compile(
        r"\b(?:arg|nar|des|exp)\.[a-z_]{2,}(?:\.q\d+)?\b|\bscore_(?:weighted|unweighted)\b"
        r"|\"(?:scores|analysis|nonce)\"\s*:"
        r"|(?:\b[A-Z]{1,2}\d{1,2}\s*[:：=]\s*\d{1,3}\b[\s,，;；、]*){3,}", _I),
    # About the essay itself ("本文…满分", "this essay … full marks"): a narrative about a
    # pupil's 满分 test or a 10-minute walk is content, not a claim.
    "score_claim": re.compile(
        r"(?:本文|本篇|这篇(?:作文|文章)?|此文|该文|拙作)[^。！？\n]{0,24}"
        r"(?:满分|最高分|一等奖|特等奖|范文|高分|(?<![\d.])10\s*分(?!钟))"
        r"|(?:满分|最高分)(?:范文|作文)[^。！？\n]{0,6}(?:本文|此文|这篇)"
        r"|(?<!\d)10\s*/\s*10(?!\d)|\b(?:full|maximum|perfect|top)\s+(?:marks|score|scores)\b"
        r"|\b(?:this|the)\s+essay\s+(?:is|was)\s+(?:flawless|perfect|exemplary|award)", _I),
    "role_markup": re.compile(
        r"<\|(?:im_start|im_end|system|user|assistant|endoftext)\|>|\[/?(?:SYSTEM|INST)\]"
        r"|^\s*(?:system|assistant|user|系统|助手|系统提示)\s*[:：]|^\s*#{1,3}\s*(?:system|instruction)",
        _I),
    "delimiter": re.compile(r"<<<|>>>|</?\s*essay\s*>|END[-_ ]?ESSAY|```|'''", _I),
}
_MASTER_KEY = re.compile(
    r"^\s*(?:thought\s+process|let'?s\s+solve|solution|answer|reasoning|解|答|思考过程)\s*[:：]",
    re.IGNORECASE)
_LATIN_RUN = re.compile(r"[A-Za-z][A-Za-z ,.;:'!?\"()\-]{59,}")
_HAN = re.compile(r"[\u3400-\u9fff]")
_WORDISH = re.compile(r"[\w\u3400-\u9fff]")


def essay_flags(prompt_text: str, essay_text: str) -> list[str]:
    """The injection markers in ``essay_text`` (see the module docstring). ``prompt_text``
    is the task: a cue the prompt itself uses (an essay on a contest may say 评委 because
    the prompt does) is not held against the essay."""
    flags = [code for code, rule in _RULES.items()
             if rule.search(essay_text) and not _in_prompt(rule, prompt_text, essay_text)]
    stripped = essay_text.strip()
    wordish = len(_WORDISH.findall(stripped))
    if _MASTER_KEY.search(stripped) or (0 < len(stripped) < 40 and wordish < 0.5 * len(stripped)):
        flags.append("master_key")
    han = len(_HAN.findall(essay_text))
    if han >= 50 and any(len(re.findall(r"[A-Za-z]", m.group())) >= 40
                         for m in _LATIN_RUN.finditer(essay_text)):
        flags.append("language_switch")
    return [code for code in FLAG_CODES if code in flags]


def _in_prompt(rule: re.Pattern[str], prompt_text: str, essay_text: str) -> bool:
    """Every match in the essay is a phrase the prompt itself contains."""
    found = {m.group().strip().lower() for m in rule.finditer(essay_text)}
    prompt = prompt_text.lower()
    return bool(found) and all(f and f in prompt for f in found)
