"""Text normalisation applied before anything compares or hashes prompt texts.

``normalize_text`` makes texts that a reader would call identical identical
byte for byte, without changing what the text says. Steps, in order:

1. **Character mapping** (one ``str.translate`` table):

   - Full-width forms U+FF01–U+FF5E map to ASCII (code point − 0xFEE0) — the
     digits ０–９, the letters Ａ–Ｚ ａ–ｚ and these symbols::

         ＂＃＄％＆＇＊＋－．／＜＝＞＠［＼］＾＿｀｛｜｝

     EXCEPT the full-width forms that *are* the standard Chinese punctuation
     (GB/T 15834), which stay as they are::

         ！（），：；？～     (U+FF01 U+FF08 U+FF09 U+FF0C U+FF1A U+FF1B U+FF1F U+FF5E)

     ``～`` stays because Chinese uses it as the range connector
     ("3000～4000字"). Punctuation outside that block (。、“”‘’《》〈〉【】…—·)
     is untouched, as are ￥ (U+FFE5) and half-width katakana.
   - U+3000 IDEOGRAPHIC SPACE becomes an ordinary space.
   - Zero-width characters U+200B ZWSP, U+200C ZWNJ, U+200D ZWJ, U+2060 WORD
     JOINER and U+FEFF (BOM) are removed.
   - Line breaks (\\r, \\v, \\f, U+0085, U+2028, U+2029) become "\\n", a tab
     becomes a space, and every other control character (category Cc) is removed.

2. **Markup** (``essaybench.curate.markup``): terminal escape sequences go first,
   while their ESC byte still marks them (step 1 removes it); after step 1, HTML tags
   (``<script>`` and ``<style>`` elements with their content) and ANSI residue such as
   "[31m" are stripped, to a fixed point. Block-level tags become a line break.

3. **Unicode NFC** — canonical composition only, so "e"+U+0301 and "é" (or a
   CJK compatibility ideograph and its unified twin) hash the same. Not NFKC:
   compatibility folding would rewrite the Chinese punctuation kept above
   (，→, ：→:), turn ① into 1, 10² into 102, ㎡ into m2, … into ..., i.e. it
   changes what a prompt says. NFC runs after steps 1 and 2 so that removing a
   zero-width character or a tag between a letter and a combining mark cannot leave
   a composable pair behind (which would break idempotence).

4. **Whitespace.** Prompts can be multi-paragraph (exam material + the task),
   so line structure is kept: each line has its runs of whitespace collapsed
   to one space and is stripped; blank lines are dropped, so *any* run of line
   breaks becomes exactly one "\\n". The result has no leading or trailing
   whitespace.

The function is idempotent: ``normalize_text(normalize_text(s)) == normalize_text(s)``.
"""

from __future__ import annotations

import re
import unicodedata

# Rules match traditional characters through matching_text (constraints use it too, so it
# lives in core); re-exported here beside the normalisation it complements.
from essaybench.core.matching import matching_text as matching_text
from essaybench.curate.markup import strip_escapes, strip_markup

# Full-width forms that are the normal Chinese punctuation and must stay full-width.
KEEP_FULLWIDTH = frozenset("！（），：；？～")

ZERO_WIDTH = ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff")
LINE_BREAKS = ("\r", "\x0b", "\x0c", "\x85", "\u2028", "\u2029")


def _build_table() -> dict[int, str | None]:
    table: dict[int, str | None] = {}
    for cp in range(0xFF01, 0xFF5F):
        if chr(cp) not in KEEP_FULLWIDTH:
            table[cp] = chr(cp - 0xFEE0)
    table[0x3000] = " "
    for ch in ZERO_WIDTH:
        table[ord(ch)] = None
    # Control characters: C0, DEL, C1. Line breaks and tab survive as whitespace.
    for cp in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]:
        table[cp] = None
    for ch in LINE_BREAKS:
        table[ord(ch)] = "\n"
    table[ord("\n")] = "\n"
    table[ord("\t")] = " "
    return table


TRANSLATION = _build_table()
_SPACES = re.compile(r"[^\S\n]+")  # any whitespace except the newline


def normalize_text(s: str | None) -> str:
    """The canonical form of a prompt text (see the module docstring); None → ""."""
    if not s:
        return ""
    text = unicodedata.normalize("NFC", strip_markup(strip_escapes(s).translate(TRANSLATION)))
    lines = (_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)
