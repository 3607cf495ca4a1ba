"""Markup and terminal escape sequences out of prompt texts.

Raw prompts scraped from chat logs and web pages carry presentation that is no part of
what the prompt asks: HTML tags (``<p>``, ``<br>``, ``<script>…</script>``) and ANSI
escape sequences (``\\x1b[31m``), or their residue once the ESC byte was lost (``[31m``).
They are **stripped** during normalisation (never left to reach the published prompt
set, where a report would render them), and the filter notes what it stripped in the
row's ``detail``; a prompt that is empty or too short once stripped is filtered by the
usual rules, with their reason. Stripping, not filtering: a prompt typed into a web form
("<p>以“门”为题写一篇作文</p>") is a good prompt once its tags are gone.

What counts as markup, conservatively (Chinese prompts use ASCII brackets too):

- ``ESC [ … final`` (CSI), ``ESC ] … BEL/ST`` (OSC), two-character ``ESC`` sequences,
  and the 8-bit CSI (U+009B);
- SGR residue ``[31m``, ``[0m``, ``[1;31m``, ``[m`` not followed by ``]``, a letter or a
  digit ("[5m]" or "[5min]" are left alone);
- tags of HTML element names only (``<门>`` or ``<Home>`` stay), with their attributes;
  ``script``, ``style``, ``iframe``, ``object``, ``embed``, ``noscript``, ``template``,
  ``svg`` and ``math`` elements with their content (code, not prose); comments and
  ``<!DOCTYPE>``. Block-level tags become a line break, inline ones nothing.

HTML character references (``&amp;``) are left as they are: decoding them could create
the markup this module removes.
"""

from __future__ import annotations

import re

MAX_PASSES = 20  # each pass shortens the text; nested leftovers need a few

_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
                      r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
                      r"|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)?"  # OSC (a title, a hyperlink)
                      r"|\x1b[@-Z\\-_]")  # two-character sequences
# Not before "]", a digit or a Latin letter, precomposed ones included: NFC (after this
# step) turns "r" + U+0301 into "ŕ", and the decision must not change when it does.
_SGR_RESIDUE = re.compile(r"\[(?:\d{1,3}(?:;\d{1,3})*)?m"
                          r"(?![\]A-Za-z0-9\u00c0-\u024f\u1e00-\u1eff])")

# HTML element names, as regular-expression alternatives.
_BLOCK = ("address|article|aside|blockquote|body|br|dd|details|dialog|div|dl|dt|fieldset|"
          "figcaption|figure|footer|form|h1|h2|h3|h4|h5|h6|head|header|hr|html|li|main|nav|"
          "ol|p|pre|section|summary|table|tbody|td|tfoot|th|thead|title|tr|ul")
_INLINE = ("a|abbr|area|audio|b|base|bdi|bdo|big|button|canvas|caption|center|cite|code|"
           "col|colgroup|data|datalist|del|dfn|em|font|frame|frameset|img|input|ins|kbd|"
           "label|legend|link|map|mark|meta|meter|optgroup|option|output|param|picture|"
           "progress|q|rp|rt|ruby|s|samp|select|slot|small|source|span|strike|strong|sub|"
           "sup|textarea|time|track|tt|u|var|video|wbr")
_CODE = "script|style|iframe|object|embed|noscript|template|svg|math"  # content is code

_COMMENT = re.compile(r"<!--.*?-->|<!--|<!doctype[^<>]*>", re.DOTALL | re.IGNORECASE)
_CODE_ELEMENT = re.compile(rf"<({_CODE})\b[^<>]*>.*?</\1\s*>",
                           re.DOTALL | re.IGNORECASE)
_ATTRS = r"(?:\s[^<>]*)?/?>"
_BLOCK_TAG = re.compile(rf"</?(?:{_BLOCK})\b{_ATTRS}", re.IGNORECASE)
_INLINE_TAG = re.compile(rf"</?(?:{_INLINE})\b{_ATTRS}", re.IGNORECASE)
_CODE_TAG = re.compile(rf"</?(?:{_CODE})\b{_ATTRS}", re.IGNORECASE)  # unpaired


def strip_escapes(text: str) -> str:
    """``text`` without terminal escape sequences (run before control characters go: the
    ESC byte is what marks them)."""
    return _ESCAPES.sub("", text)


def _strip_once(text: str) -> str:
    text = _COMMENT.sub("", text)
    text = _BLOCK_TAG.sub("\n", text)
    text = _INLINE_TAG.sub("", text)
    # After the other tags: "<scr<b>ipt>…</script>" is a script element once <b> is gone.
    text = _CODE_ELEMENT.sub("", text)
    text = _CODE_TAG.sub("", text)
    return _SGR_RESIDUE.sub("", text)


def strip_markup(text: str) -> str:
    """``text`` without HTML markup and SGR residue, to a fixed point (removing one piece
    may join the halves of another: ``<scr<b>ipt>``)."""
    for _ in range(MAX_PASSES):
        stripped = _strip_once(text)
        if stripped == text:
            return text
        text = stripped
    return text


def markup_found(text: str | None) -> list[str]:
    """What ``strip_escapes`` and ``strip_markup`` would remove from ``text``, by kind, for
    the filter's evidence: "ansi", "html:<code element>", "html"."""
    if not text:
        return []
    found = []
    if _ESCAPES.search(text) or _SGR_RESIDUE.search(text):
        found.append("ansi")
    found += sorted({f"html:{m.group(1).lower()}" for m in _CODE_ELEMENT.finditer(text)})
    rest = _CODE_ELEMENT.sub("", text)
    if any(p.search(rest) for p in (_COMMENT, _BLOCK_TAG, _INLINE_TAG, _CODE_TAG)):
        found.append("html")
    return found
