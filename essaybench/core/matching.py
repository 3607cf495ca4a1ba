"""The text that rules match against: traditional characters read as simplified ones.

Prompts arrive in both scripts (寫一篇記敘文 and 写一篇记叙文 ask for the same
thing), and every rule of the project (filter cues, constraint rules, genre cues)
is written in simplified characters. ``matching_text`` gives the rules a simplified
reading of a text; the text itself is never replaced: records, hashes, evidence
and the published prompt keep what the source wrote.

The conversion is OpenCC's ``t2s`` (phrase-aware, so 著名 stays 著名 and 乾隆
stays 乾隆 while 乾燥 becomes 干燥). It must keep every character at its offset:
a rule's match span on the matching text is used as is on the original text
(evidence == text[span]). OpenCC's traditional-to-simplified tables map one
character to one character, and the rare text whose conversion changes length is
converted character by character instead, keeping any character whose own
conversion is not exactly one character.
"""

from __future__ import annotations

import functools

import opencc

# Below this, every code point is ASCII or Latin/IPA/Greek/Cyrillic …: nothing to convert.
_FIRST_CJK = 0x2E80


@functools.cache
def _converter() -> opencc.OpenCC:
    return opencc.OpenCC("t2s")


def _char_by_char(text: str, convert: opencc.OpenCC) -> str:
    out = []
    for ch in text:
        simplified: str = convert.convert(ch)
        out.append(simplified if len(simplified) == 1 else ch)
    return "".join(out)


@functools.lru_cache(maxsize=4096)  # the filter, constraints and genre rules read one text
def matching_text(text: str) -> str:
    """``text`` with traditional characters replaced by simplified ones, offset for offset
    (``len(matching_text(t)) == len(t)``); for matching only, never for storage."""
    if not text or max(map(ord, text)) < _FIRST_CJK:
        return text
    convert = _converter()
    simplified: str = convert.convert(text)
    if len(simplified) != len(text):
        simplified = _char_by_char(text, convert)
    return simplified
