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
- what the standard library's HTML tokenizer (``html.parser``) reads as a tag, a comment
  or a declaration — so ``a<b``, ``3<5，8>2`` and ``<门>`` (a tag name starts with an
  ASCII letter) are text, and so is a "tag" whose name is not a tag name (``若a<b且c>d``);
  of those tags, every HTML element (the HTML standard's element index, obsolete ones
  included) and any tag used as markup (with attributes, self-closed, or closed later);
  a lone bare unknown tag (``请以<Home>为题``) is text. ``script``, ``style``,
  ``iframe``, ``object``, ``embed``, ``noscript``, ``template``, ``svg`` and ``math``
  elements go with their content (code, not prose) when closed; block-level tags
  become a line break, inline ones nothing. Applied until the text no longer changes:
  removing one tag may join the halves of another (``<scr<i>ipt>``).

HTML character references (``&amp;``) are left as they are: decoding them could create
the markup this module removes.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

MAX_PASSES = 20  # each pass shortens the text; nested leftovers need a few

_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
                      r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
                      r"|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)?"  # OSC (a title, a hyperlink)
                      r"|\x1b[@-Z\\-_]")  # two-character sequences
# Not before "]", a digit or a Latin letter, precomposed ones included: NFC (after this
# step) turns "r" + U+0301 into "ŕ", and the decision must not change when it does.
_SGR_RESIDUE = re.compile(r"\[(?:\d{1,3}(?:;\d{1,3})*)?m"
                          r"(?![\]A-Za-z0-9\u00c0-\u024f\u1e00-\u1eff])")



def _names(words: str) -> frozenset[str]:
    return frozenset(words.split())


# The HTML standard's element index (WHATWG, obsolete and SVG/MathML roots included):
# whether a lone bare tag is HTML, never whether text is a tag (the tokenizer decides).
_ELEMENTS = _names("""
a abbr acronym address applet area article aside audio b base basefont bdi bdo bgsound big
blink blockquote body br button canvas caption center cite code col colgroup data datalist dd
del details dfn dialog dir div dl dt em embed fieldset figcaption figure font footer form
frame frameset h1 h2 h3 h4 h5 h6 head header hgroup hr html i iframe image img input ins isindex
kbd keygen label legend li link listing main map mark marquee math menu menuitem meta meter
multicol nav nextid nobr noembed noframes noscript object ol optgroup option output p param
picture plaintext pre progress q rb rp rt rtc ruby s samp script search section select slot
small source spacer span strike strong style sub summary sup svg table tbody td template
textarea tfoot th thead time title tr track tt u ul var video wbr xmp
""")
_BLOCK = _names("""
address article aside blockquote body br dd details dialog div dl dt fieldset figcaption
figure footer form h1 h2 h3 h4 h5 h6 head header hr html li main nav ol p pre section
summary table tbody td tfoot th thead title tr ul
""")
_CODE = _names("script style iframe object embed noscript template svg math")
_TAG_NAME = re.compile(r"[a-z][a-z0-9-]*\Z")


class _Tokens(HTMLParser):
    """The tokenizer's reading of a text, every token with its raw text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        # (kind, name, raw, attributes?): kind data | start | end | other
        self.tokens: list[tuple[str, str, str, bool]] = []

    def set_cdata_mode(self, elem: str, *, escapable: bool = False) -> None:
        """Script and style content is read as text like any other (and dropped with its
        element when that is closed): an unclosed ``<script>`` must not swallow the rest."""

    def _add(self, kind: str, name: str = "", raw: str = "", attrs: bool = False) -> None:
        self.tokens.append((kind, name, raw, attrs))

    def handle_data(self, data: str) -> None:
        self._add("data", raw=data)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._add("start", tag, self.get_starttag_text() or "", bool(attrs))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._add("start", tag, self.get_starttag_text() or "", True)

    def handle_endtag(self, tag: str) -> None:
        self._add("end", tag, f"</{tag}>")

    def handle_comment(self, data: str) -> None:
        self._add("other")

    def handle_decl(self, decl: str) -> None:
        self._add("other")

    def unknown_decl(self, data: str) -> None:
        self._add("other")

    def handle_pi(self, data: str) -> None:
        self._add("other")


def strip_escapes(text: str) -> str:
    """``text`` without terminal escape sequences (run before control characters go: the
    ESC byte is what marks them)."""
    return _ESCAPES.sub("", text)


def _html_once(text: str, found: set[str], keep_orphans: bool) -> str:
    """One tokenizer pass. ``found`` collects what went ("html", "html:script"…).
    ``keep_orphans``: an end tag of a code element that nothing opened stays (a later pass
    may pair it: ``<scr<i>ipt>x</script>``)."""
    if "<" not in text:
        return text
    # The tokenizer would read "&lt;" as a reference: it is text here, and stays as written.
    amp = next(chr(c) for c in range(0xF8FF, 0xE000, -1) if chr(c) not in text)
    parser = _Tokens()
    parser.feed(text.replace("&", amp))
    parser.close()
    tokens = parser.tokens
    closed_later: list[set[str]] = [set() for _ in range(len(tokens) + 1)]
    for i in range(len(tokens) - 1, -1, -1):
        end = {tokens[i][1]} if tokens[i][0] == "end" else set()
        closed_later[i] = closed_later[i + 1] | end
    out: list[str] = []
    opened: set[str] = set()
    code_stack: list[tuple[str, int]] = []
    for i, (kind, name, raw, attrs) in enumerate(tokens):
        if kind == "data":
            out.append(raw)
        elif kind == "other":
            found.add("html")
        elif kind == "start" and not _TAG_NAME.match(name):
            inner = raw.find("<", 1)  # "<scr<i>": a tag inside a broken one
            out.append(raw if inner < 0
                       else raw[:inner] + _html_once(raw[inner:], found, keep_orphans))
        elif kind == "start":
            if not (name in _ELEMENTS or attrs or name in closed_later[i + 1]):
                out.append(raw)  # a lone bare word in angle brackets: text
                continue
            opened.add(name)
            if name in _CODE and name in closed_later[i + 1]:
                code_stack.append((name, len(out)))  # found when its end tag drops it
            else:
                found.add("html")
            out.append("\n" if name in _BLOCK else "")
        elif any(open_name == name for open_name, _ in code_stack):
            while code_stack:
                open_name, at = code_stack.pop()
                if open_name == name:
                    del out[at:]
                    found.add(f"html:{name}")
                    break
        elif name in _CODE and keep_orphans:
            out.append(raw)
        elif name in _ELEMENTS or name in opened:
            found.add("html")
            out.append("\n" if name in _BLOCK else "")
        else:
            out.append(raw)
    return "".join(out).replace(amp, "&")


def _strip(text: str, found: set[str]) -> str:
    """To a fixed point, orphan code end tags kept until nothing else changes."""
    keep = True
    for _ in range(MAX_PASSES):
        stripped = _html_once(text, found, keep)
        residue = _SGR_RESIDUE.sub("", stripped)
        if residue != stripped:
            found.add("ansi")
        if residue == text:
            if not keep:
                return text
            keep = False
        else:
            keep = True
        text = residue
    return text


def strip_markup(text: str) -> str:
    """``text`` without HTML markup and SGR residue, to a fixed point (removing one piece
    may join the halves of another: ``<scr<i>ipt>``)."""
    return _strip(text, set())


def markup_found(text: str | None) -> list[str]:
    """What ``strip_escapes`` and ``strip_markup`` would remove from ``text``, by kind, for
    the filter's evidence: "ansi", "html:<code element>", "html"."""
    if not text:
        return []
    found: set[str] = set()
    if _ESCAPES.search(text):
        found.add("ansi")
    _strip(strip_escapes(text), found)
    codes = sorted(f for f in found if f.startswith("html:"))
    return ["ansi"] * ("ansi" in found) + codes + ["html"] * ("html" in found)
