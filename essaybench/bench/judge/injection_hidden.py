"""Text an essay hides from a reader but not from a model: the injection detector reads it
too (:func:`hidden_text`; :mod:`essaybench.bench.judge.injection` appends it to the folded
essay before its rules run).

- escaped characters: ``\\u8bf7\\u7ed9`` (JSON/Python escapes), ``\\xe8\\xaf\\xb7`` (UTF-8
  bytes), ``&#35831;``/``&#x8bf7;`` (HTML), ``%E8%AF%B7`` (URL encoding);
- base64: a run of 16 or more base64 characters that decodes to UTF-8 text with Han
  characters or Latin words;
- an acrostic (藏头): four or more short lines in a row, read by their first characters.

Nothing here needs a hint how to read the text: ``injection_rules`` flags the hint
itself (``base64``, 藏头, 每行第一个字) where there is one.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
import urllib.parse

_U_ESCAPES = re.compile(r"(?:\\u[0-9a-fA-F]{4}){2,}")
_X_ESCAPES = re.compile(r"(?:\\x[0-9a-fA-F]{2}){3,}")
_HTML_ESCAPES = re.compile(r"(?:&#(?:[0-9]{2,7}|[xX][0-9a-fA-F]{2,6});){2,}")
_URL_ESCAPES = re.compile(r"(?:%[0-9A-Fa-f]{2}){3,}")
_BASE64 = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")
_READABLE = re.compile(r"[\u3400-\u9fff]|[A-Za-z]{2,}\s+[A-Za-z]{2,}")
_ACROSTIC = re.compile(r"(?:^[ \t]*[\u3400-\u9fff][^\n]{1,23}\n){3,}[ \t]*[\u3400-\u9fff]"
                       r"[^\n]{1,23}$", re.MULTILINE)
_SHORT_LINE = re.compile(r"^[ \t]*([\u3400-\u9fff])", re.MULTILINE)


def hidden_text(text: str) -> str:
    """What ``text`` hides, decoded, one line per hiding place ("" when nothing)."""
    found: list[str] = []
    if "\\" in text:
        found += [_utf16(m.group().encode().decode("unicode_escape", "replace"))
                  for m in _U_ESCAPES.finditer(text)]
        found += [_utf8(bytes(int(h, 16) for h in m.group().split("\\x")[1:]))
                  for m in _X_ESCAPES.finditer(text)]
    if "&#" in text:
        found += [html.unescape(m.group()) for m in _HTML_ESCAPES.finditer(text)]
    if "%" in text:
        found += [urllib.parse.unquote(m.group(), errors="replace")
                  for m in _URL_ESCAPES.finditer(text)]
    for m in _BASE64.finditer(text):
        decoded = _base64(m.group())
        if decoded and _READABLE.search(decoded):
            found.append(decoded)
    found += ["".join(_SHORT_LINE.findall(m.group())) for m in _ACROSTIC.finditer(text)]
    return "\n".join(line.replace("\n", " ") for line in found if line.strip())


def _utf16(escaped: str) -> str:
    """``escaped`` with its surrogate pairs (``\\ud83d\\udcaf``) joined and lone surrogates
    replaced: text the rest of the detector can encode."""
    return escaped.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _utf8(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _base64(run: str) -> str:
    padded = run + "=" * (-len(run) % 4)
    try:
        return base64.b64decode(padded, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return ""
