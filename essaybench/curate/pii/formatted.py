"""Formatted identifiers in raw text: each a pattern, and where one exists a checksum.

Every finder reads the *folded* text (:func:`fold`: full-width digits, letters and
punctuation as ASCII, one character for one, so offsets are the original text's) and
yields :class:`Span` s. A number is an identifier only when it is delimited: no digit
(or, for letters-and-digits identifiers, no letter) touches either end, so the digits of
"不少于800字", "2024年", "10月1日" or a price never start one. Validity where the format
has it: ID cards by their ISO 7064 MOD 11-2 check digit and birth date (not
``stdnum.cn.ric``: it also refuses area codes created after the birth date, which real
cards carry), bank cards by Luhn (``stdnum.luhn``), IPv4/IPv6 by
:mod:`ipaddress`, URLs only when they carry a credential-like query parameter, a street
address down to a house number (滨江路18号3单元, 阳光小区3栋501室) where the text gives
it as someone's (家住, 地址, 寄到 …).
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date

from stdnum import luhn


@dataclass(frozen=True, order=True)
class Span:
    start: int
    end: int
    kind: str


class _FoldTable(dict[int, str]):
    """``str.translate`` table of :func:`fold`, filled on first sight of each code point
    (one NFKC call per distinct character of a run, not per character of every text)."""

    def __missing__(self, cp: int) -> str:
        ch = chr(cp)
        folded = unicodedata.normalize("NFKC", ch)
        self[cp] = out = folded if len(folded) == 1 else ch
        return out


_FOLD = _FoldTable()


def fold(text: str) -> str:
    """NFKC of each character where that is one character (full-width ０-９, Ａ-Ｚ, ＠,
    －, （ ） become ASCII), else the character: the result aligns with ``text``."""
    # One translate call instead of a normalize call per character: collect read
    # 1,000,000 records, ~100 non-ASCII characters each.
    return text if text.isascii() else text.translate(_FOLD)


_SEP = r"[ \-\u00a0]"  # a space or dash between digit groups
# No digit, nor a digit and a separator, on either side: a number inside a longer group
# of digit blocks ("6222 0212 3456 7897") is not a phone number.
_NB = r"(?<![0-9])(?<![0-9][ \-])"
_NA = r"(?![0-9])(?![ \-][0-9])"
_MOBILE = re.compile(
    rf"{_NB}(?:(?:\+|00)?86{_SEP}?|\(\+?86\){_SEP}?)?1[3-9][0-9](?:{_SEP}?[0-9]){{8}}{_NA}")
_LANDLINE = re.compile(
    rf"{_NB}(?<!\.)(?:\(0[1-9][0-9]{{1,2}}\)|0[1-9][0-9]{{1,2}}){_SEP}?[1-9][0-9]{{2,3}}"
    rf"{_SEP}?[0-9]{{4}}(?:-[0-9]{{1,5}})?{_NA}")
_SERVICE = re.compile(rf"{_NB}[48]00{_SEP}?[0-9]{{3}}{_SEP}?[0-9]{{4}}{_NA}")
_ID18 = re.compile(r"(?<![0-9A-Za-z])[1-9][0-9]{5} ?(?:18|19|20)[0-9]{2}(?:0[1-9]|1[0-2])"
                   r"(?:0[1-9]|[12][0-9]|3[01]) ?[0-9]{3}[0-9Xx](?![0-9A-Za-z])")
_ID15 = re.compile(r"(?<![0-9A-Za-z])[1-9][0-9]{5}[0-9]{2}(?:0[1-9]|1[0-2])"
                   r"(?:0[1-9]|[12][0-9]|3[01])[0-9]{3}(?![0-9A-Za-z])")
_ID15_CUE = re.compile(r"(?:身份证|身份證|证件|證件|ID)[^\n]{0,12}$", re.IGNORECASE)
_CARD = re.compile(rf"{_NB}[0-9]{{4}}(?:{_SEP}?[0-9]{{4}}){{2,3}}(?:{_SEP}?[0-9]{{1,3}})?{_NA}")
_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+"
                    r"(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![A-Za-z])")
# Folded text: full-width ，；！（） are ASCII here, so a URL ends at those too.
_URL = re.compile(r"(?:https?://|www\.)[^\s<>\"'，。；、！？）】》「」『』“”,;!()\u4e00-\u9fff]+",
                  re.IGNORECASE)
# A query parameter whose name says it carries a credential (token, auth_token, api_key,
# Signature, sessionid, ticket, pwd …).
_TOKEN_KEY = re.compile(
    r"[?&#;][\w.-]*(?:token|key|secret|sign|sig|session|sid|auth|ticket|code|pwd|passw|"
    r"pass|otp|jwt|openid|credential)[\w.-]*=[^&#\s]+", re.IGNORECASE)
_IPV4 = re.compile(r"(?<![0-9.])(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}"
                   r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(?!\.?[0-9])")
_VERSION_BEFORE = re.compile(r"(?:v|V|版本|version|Version|ver\.?)\s*$")
_IPV6 = re.compile(r"(?<![0-9A-Fa-f:])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}"
                   r"(?![0-9A-Fa-f:])")
# The id within a short clause after its cue (扣扣空间里发了，号码49430).
_QQ = re.compile(r"(?:QQ|扣扣|企鹅号|Q号)[^0-9，。；！？,;!?\n]{0,8}[，,]?[^0-9。；！？;!?\n]{0,4}"
                 r"(?<![0-9])(?P<id>[1-9][0-9]{4,10})(?![0-9])", re.IGNORECASE)
_WECHAT = re.compile(r"(?<![A-Za-z])(?:微信号|微信账号|微信|威信|v信|v我|VX|WX|weixin|wechat)"
                     r"\s*(?:号码|账号|号)?\s*(?:是|为|:|：)?\s*(?P<id>[A-Za-z][-_A-Za-z0-9]{5,19})(?![-_A-Za-z0-9])",
                     re.IGNORECASE)
# An id written before its cue (我的号：t809598989——微信), and WeChat's own wxid_ ids anywhere.
_WECHAT_AFTER = re.compile(r"(?<![-_A-Za-z0-9])(?P<id>[A-Za-z][-_A-Za-z0-9]{5,19})"
                           r"[\s—\-–:：(（]{1,4}(?:微信|wechat|weixin|VX|wx)", re.IGNORECASE)
_WXID = re.compile(r"(?<![-_A-Za-z0-9])(?P<id>wxid_[a-z0-9]{6,24})(?![-_A-Za-z0-9])",
                   re.IGNORECASE)
# +86 before a landline drops the area code's 0: +86-551-4864407, 0086 10 62345678.
_LANDLINE_INTL = re.compile(rf"{_NB}(?:\+|00)86{_SEP}?(?:\(?[1-9][0-9]{{1,2}}\)?){_SEP}?"
                            rf"[1-9][0-9]{{2,3}}{_SEP}?[0-9]{{4}}{_NA}")
# A street address down to the house number, only where the text gives it as where
# someone lives or receives things (家住, 地址：, 寄到 …): a school or a street in essay
# material stays.
_ADDRESS = re.compile(
    r"(?P<cue>家住|住在|住址|地址|寄到|寄往|送到|收货|邮寄到|快递到)[是为:：\s]{0,2}"
    r"(?P<addr>(?:[\u4e00-\u9fff]{1,8}?(?:省|市|区|县|镇|乡))*"
    r"(?:[\u4e00-\u9fff]{1,6}?(?:路|街|大道|巷|弄|胡同)[0-9]+号(?:院)?"
    r"(?:[0-9]+(?:栋|幢|号楼|单元|楼|层|室|号))*"
    r"|[\u4e00-\u9fff]{2,8}?(?:小区|花园|公寓|新村|家园|苑)[0-9]+(?:栋|幢|号楼)"
    r"(?:[0-9]+(?:单元|楼|层|室|号))*))")
_PROVINCES = "京津沪渝冀豫云辽黑湘皖鲁新苏浙赣鄂桂甘晋蒙陕吉闽贵粤青藏川宁琼"
_PLATE = re.compile(rf"[{_PROVINCES}][A-Z][·•・ \-]?(?P<tail>[A-Z0-9]{{4,5}}[A-Z0-9挂学警])"
                    r"(?![A-Za-z0-9])")


_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def valid_resident_id(s: str) -> bool:
    """GB 11643 check: ISO 7064 MOD 11-2 check character and a real birth date."""
    if len(s) != 18 or not s[:17].isdigit():
        return False
    check = "10X98765432"[sum(int(c) * w for c, w in zip(s, _ID_WEIGHTS, strict=False)) % 11]
    if s[17].upper() != check:
        return False
    try:
        born = date(int(s[6:10]), int(s[10:12]), int(s[12:14]))
    except ValueError:
        return False
    return 1900 <= born.year <= 2100


def _digits(s: str) -> str:
    return re.sub(r"[^0-9Xx]", "", s)


def _mobiles(text: str) -> Iterator[Span]:
    for m in _MOBILE.finditer(text):
        yield Span(m.start(), m.end(), "phone")
    for pattern in (_LANDLINE, _LANDLINE_INTL, _SERVICE):
        for m in pattern.finditer(text):
            yield Span(m.start(), m.end(), "phone")


def _id_cards(text: str) -> Iterator[Span]:
    for m in _ID18.finditer(text):
        if valid_resident_id(_digits(m.group()).upper()):
            yield Span(m.start(), m.end(), "id_card")
    for m in _ID15.finditer(text):  # no check digit: only where the text says what it is
        if _ID15_CUE.search(text[max(0, m.start() - 16):m.start()]):
            yield Span(m.start(), m.end(), "id_card")


def _id_shaped(digits: str) -> bool:
    """18 digits with a birth date where an ID card has one: a mistyped ID number (its
    check digit failed), not a bank card that happens to pass Luhn."""
    return len(digits) == 18 and _ID18.fullmatch(digits) is not None


def _bank_cards(text: str) -> Iterator[Span]:
    for m in _CARD.finditer(text):
        digits = _digits(m.group())
        if 16 <= len(digits) <= 19 and luhn.is_valid(digits) and not _id_shaped(digits):
            yield Span(m.start(), m.end(), "bank_card")


def _emails(text: str) -> Iterator[Span]:
    for m in _EMAIL.finditer(text):
        yield Span(m.start(), m.end(), "email")


def _urls(text: str) -> Iterator[Span]:
    for m in _URL.finditer(text):
        url = m.group().rstrip(".,;:!?)")
        if _TOKEN_KEY.search(url):
            yield Span(m.start(), m.start() + len(url), "url_token")


def _ips(text: str) -> Iterator[Span]:
    for m in _IPV4.finditer(text):
        if not _VERSION_BEFORE.search(text[max(0, m.start() - 8):m.start()]):
            yield Span(m.start(), m.end(), "ip")
    for m in _IPV6.finditer(text):
        candidate = m.group()
        if candidate.count(":") < 2 or not re.search(r"[0-9A-Fa-f]", candidate):
            continue
        if not _ipv6(candidate):
            continue
        end = m.end()
        port = re.search(r":(?:80|443|8080|8000|8443|8888|3000|5000|9000)$", candidate)
        if port and "::" in candidate[:port.start()] and _ipv6(candidate[:port.start()]):
            end = m.start() + port.start()  # fe80::1:8080: the address, then its port
        yield Span(m.start(), end, "ip")


def _ipv6(candidate: str) -> bool:
    try:
        ipaddress.IPv6Address(candidate)
    except ValueError:
        return False
    return True


def _cued(pattern: re.Pattern[str], kind: str) -> Callable[[str], Iterator[Span]]:
    def find(text: str) -> Iterator[Span]:
        for m in pattern.finditer(text):
            yield Span(m.start("id"), m.end("id"), kind)
    return find


def _plates(text: str) -> Iterator[Span]:
    for m in _PLATE.finditer(text):
        if sum(c.isdigit() for c in m.group("tail")) >= 3:
            yield Span(m.start(), m.end(), "plate")


def _addresses(text: str) -> Iterator[Span]:
    for m in _ADDRESS.finditer(text):
        yield Span(m.start("addr"), m.end("addr"), "address")


# In priority order: where two overlap, the earlier kind wins (an 18-digit ID card that
# happens to pass Luhn is an ID card; a URL's e-mail-like user part is the URL's).
# Beside each finder, what its pattern cannot match without (digits: the fewest ASCII
# digits a match holds): a prompt without them is not scanned (collect reads 10^6 records,
# most with a length or no number at all).
FINDERS: tuple[tuple[str, Callable[[str], Iterator[Span]]], ...] = (
    ("url_token", _urls),
    ("email", _emails),
    ("id_card", _id_cards),
    ("bank_card", _bank_cards),
    ("phone", _mobiles),
    ("ip", _ips),
    ("qq", _cued(_QQ, "qq")),
    ("wechat", _cued(_WXID, "wechat")),
    ("wechat", _cued(_WECHAT, "wechat")),
    ("wechat", _cued(_WECHAT_AFTER, "wechat")),
    ("plate", _plates),
    ("address", _addresses),
)


@dataclass(frozen=True)
class _Needs:
    digits: int = 0  # the fewest ASCII digits a match holds
    chars: str = ""  # a match holds one of these characters ("": no such condition)
    letter: bool = False  # a match holds an ASCII letter


# Read off each pattern: https?:// or www.; a local part @ a domain; 15/18-digit ID
# numbers; 16-19-digit cards; phone numbers of at least 10 digits (400-123-4567);
# an IPv4 address (4 numbers) or an IPv6 one (two colons at least); a QQ number of 5
# digits at least; wxid_ and WeChat ids start with a letter, the cue 微信/威信/v信 holds
# 信 or a letter; a plate has a letter and 3 digits; an address a house number.
_FINDER_NEEDS: tuple[tuple[_Needs, ...], ...] = (
    (_Needs(chars=":."),),
    (_Needs(chars="@"),),
    (_Needs(digits=15),),
    (_Needs(digits=16),),
    (_Needs(digits=10),),
    (_Needs(digits=4), _Needs(chars=":")),
    (_Needs(digits=5),),
    (_Needs(letter=True),),
    (_Needs(letter=True),),
    (_Needs(letter=True),),
    (_Needs(digits=3, letter=True),),
    (_Needs(digits=1),),
)
_NOT_DIGITS = re.compile(r"[^0-9]+")
_ASCII_LETTER = re.compile(r"[A-Za-z]")


def _may_match(needs: tuple[_Needs, ...], folded: str, digits: int, letter: bool) -> bool:
    """Whether ``folded`` has what one of the alternatives ``needs`` cannot match without."""
    return any(digits >= need.digits and (letter or not need.letter)
               and (not need.chars or any(c in folded for c in need.chars))
               for need in needs)


def formatted_spans(folded: str) -> list[Span]:
    """Every formatted identifier in ``folded`` (already :func:`fold` ed), overlaps
    resolved by :data:`FINDERS`' order."""
    digits = len(_NOT_DIGITS.sub("", folded))
    letter = _ASCII_LETTER.search(folded) is not None
    taken: list[Span] = []
    for (_, finder), needs in zip(FINDERS, _FINDER_NEEDS, strict=True):
        if not _may_match(needs, folded, digits, letter):
            continue
        for span in finder(folded):
            if not any(span.start < t.end and t.start < span.end for t in taken):
                taken.append(span)
    return sorted(taken)
