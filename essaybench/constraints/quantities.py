"""Requirements stated as a number: length in characters, paragraphs, arguments, examples,
and counts of pieces to write (十条评语, 两首诗).

Qualifiers before (不少于, 至少, 约, 控制在 …) or after (以上, 以内, 左右 …) a number
set its bound; see the package doc for what counts as a length or a count. A length
carries the target it names, if any (``essaybench.constraints.targets``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from essaybench.constraints.model import Constraint, ConstraintKind
from essaybench.constraints.numbers import CN_DIGIT, CN_UNIT, NUM, count_range, parse_number
from essaybench.constraints.targets import length_target

# --- length ----------------------------------------------------------------------

_MIN = ("不少于|不低于|不得少于|不能少于|不应少于|不可少于|不要少于|不宜少于|不小于|至少|最少|"
        "起码|不下于|多于|超过")
_MAX = ("不超过|不多于|不得超过|不能超过|不应超过|不可超过|不要超过|不宜超过|不大于|最多|至多|"
        "少于|低于|限制在|限定在|限")
_APPROX = "大约|大概|大致|差不多|约"
_LEFT = re.compile(rf"(?:(?P<min>{_MIN})|(?P<max>{_MAX})|(?P<approx>{_APPROX})|(?P<cap>控制在))"
                   r"(?:在|为|写|要|写到|达到|是)?\s*$")
_RIGHT = re.compile(r"\s*(?:(?P<min>及以上|或以上|以上|之上|开外)"
                    r"|(?P<max>以内|之内|以下|之下|内(?!容))|(?P<approx>左右|上下(?!文)|为宜))")
_RANGE_SEP = r"\s*(?:[-~～—–－]+|至|到)\s*"
_QTY = rf"(?P<a>{NUM})(?:\s*个?字?{_RANGE_SEP}(?P<b>{NUM}))?\s*(?P<more>余|多)?"
_NOT_A_LENGTH_AFTER = "路架经形句典迹谜符幕条帖体母"
_LENGTH_RXS = (
    # 字数不少于800 / 篇幅在600到800字之间: the number may stand without 字
    re.compile(rf"(?:字数|篇幅)[^，。；！？\n0-9一二两三四五六七八九十百千万]{{0,8}}?{_QTY}"
               r"\s*(?:个?字)?(?:之间)?"),
    re.compile(rf"(?<!《){_QTY}\s*个?字(?![{_NOT_A_LENGTH_AFTER}])"),
    # 五六百字 = 500–600
    re.compile(r"(?P<r1>[一二三四五六七八])(?P<r2>[二三四五六七八九])(?P<u>[百千])(?:余|多)?个?字"),
)


def _length_at(text: str, m: re.Match[str], led: bool) -> Constraint | None:
    start, end = m.span()
    if "r1" in m.groupdict():
        lo, hi = CN_DIGIT[m["r1"]], CN_DIGIT[m["r2"]]
        if hi != lo + 1:
            return None
        unit = CN_UNIT[m["u"]]
        return Constraint("length", m[0], (start, end), min_chars=lo * unit, max_chars=hi * unit,
                          target=length_target(text, (start, end)))
    a = parse_number(m["a"])
    b = parse_number(m["b"]) if m["b"] else None
    if a is None or (m["b"] and b is None):
        return None
    left_text = m[0][: m.start("a") - start] if led else text[max(0, start - 8): start]
    left = _LEFT.search(left_text)
    right = _RIGHT.match(text, end)
    if not led and left:
        start -= len(left_text) - left.start()
    if right:
        end = right.end()
    left_kind = left.lastgroup if left else None
    right_kind = right.lastgroup if right else None
    target = length_target(text, (start, end))
    if b is not None:
        lo, hi = min(a, b), max(a, b)
        return Constraint("length", text[start:end], (start, end), min_chars=lo, max_chars=hi,
                          target=target)
    # a named target qualifies a small number too: 每条10个字, 题目10个字
    qualified = bool(led or left or right or m["more"] or target)
    if a < 10 or (not qualified and a < 100):
        return None
    if left_kind in ("min", "max"):
        bound = left_kind
    elif right_kind:
        bound = right_kind
    elif m["more"]:
        bound = "min"  # 八百余字, 千多字: more than
    elif left_kind == "cap":
        bound = "max"  # 控制在800字: a ceiling
    else:
        bound = "approx"  # 约800字, and a bare 800字 is a target
    return Constraint("length", text[start:end], (start, end),
                      min_chars=a if bound == "min" else None,
                      max_chars=a if bound == "max" else None,
                      approx_chars=a if bound == "approx" else None, target=target)


def _lengths(text: str) -> Iterator[Constraint]:
    for i, rx in enumerate(_LENGTH_RXS):
        pos = 0
        while (m := rx.search(text, pos)) is not None:
            found = _length_at(text, m, led=i == 0)
            if found is not None:
                yield found
                pos = m.end()
            else:  # 统一八百字: retry one character later so 八百字 is still seen
                pos = m.start() + 1


# --- counts: paragraphs, arguments, examples --------------------------------------

_SMALL = r"(?:\d{1,2}|[一二两三四五六七八九十]{1,3})"
_COUNT_LEFT = rf"(?P<pre>{_MIN}|{_MAX}|分成|分为|写成|分|共|用)?"
_COUNT_RIGHT = re.compile(r"(?P<min>及以上|以上)|(?P<max>以内|之内|以下)|左右")
_PARA_RX = re.compile(rf"{_COUNT_LEFT}\s*(?P<n>{_SMALL})(?:{_RANGE_SEP}(?P<n2>{_SMALL}))?\s*"
                      r"(?P<ge>个)?(?P<unit>自然段|段落|段)")
# after a bare 三段: a boundary, not a word (三段论, 一段经历)
_PARA_BOUNDARY = re.compile(
    r"$|[，。；、！？,.;:：）)\s]|以上|以内|左右|式|结构|来|写|组成|构成|话|文字")
_ITEM_RX = re.compile(rf"{_COUNT_LEFT}\s*(?P<n>{_SMALL})(?:{_RANGE_SEP}(?P<n2>{_SMALL}))?\s*"
                      r"(?P<ge>个|条|种|件|处|则)(?:以上)?[^，。；！？\n]{0,6}?"
                      r"(?P<unit>分论点|论点|论据|事例|例子|实例|论证方法|说明方法|修辞手法)")


def _counts(text: str, rx: re.Pattern[str], kind: ConstraintKind) -> Iterator[Constraint]:
    pos = 0
    while (m := rx.search(text, pos)) is not None:
        pos = m.start() + 1
        lo_hi = count_range(m["n"])
        hi2 = count_range(m["n2"]) if m["n2"] else None
        ordinal = m.start() > 0 and text[m.start() - 1] == "第"  # 第三段 names a paragraph
        if lo_hi is None or (m["n2"] and hi2 is None) or ordinal:
            continue
        lo: int = min(lo_hi[0], (hi2 or lo_hi)[1])  # 五到三段 is 3–5, never min > max
        hi: int | None = max(lo_hi[0], (hi2 or lo_hi)[1])
        pre = m["pre"] or ""
        bare = not (pre or m["ge"])
        # 分三段论述 is a count, 用三段论 and 一段经历 are not
        if (kind == "paragraphs" and m["unit"] == "段" and pre not in ("分", "分成", "分为", "写成")
                and (lo < 2 or not _PARA_BOUNDARY.match(text, m.end()))):
            continue
        if kind == "style" and bare:
            continue
        end = m.end()
        right = _COUNT_RIGHT.match(text, end)
        if right:
            end = right.end()
        at_least = bool(re.fullmatch(_MIN, pre)) or (right is not None and right.lastgroup == "min")
        at_most = bool(re.fullmatch(_MAX, pre)) or (right is not None and right.lastgroup == "max")
        # 三个论据 means at least three; 分三段 means exactly three
        if lo == hi and (at_least or (kind == "style" and not at_most)):
            hi = None
        if lo == hi and at_most:
            lo = 0
        yield Constraint(kind, text[m.start():end], (m.start(), end), min_count=lo or None,
                         max_count=hi)
        pos = end


# --- counts of pieces to write: 十条评语, 两首诗, 两篇作文, 三点建议 -------------------------

# A count of pieces needs a verb of making or a bound before it: 人生有两条路 (material)
# and 三点钟 are not requirements. One piece (写一篇, 一首诗) is not a count.
_MAKE = "写出|写下|写上|写|创作|作|编写|编|拟写|拟出|拟|列出|列举|提出|给出|说出|设计|准备|附上|附"
_PIECE_RX = re.compile(
    rf"(?:(?P<pre>{_MIN}|{_MAX})(?:{_MAKE})?|(?:{_MAKE}))\s*(?P<n>{_SMALL})"
    rf"(?:{_RANGE_SEP}(?P<n2>{_SMALL}))?\s*(?P<unit>条|首|篇|点|句)(?![钟半整])"
    # the thing counted: 十条10字的评语 -> 评语, 两首关于春天的诗 -> 诗
    r"(?:(?:[^，。；！？\n]{0,12}的)?(?P<obj>[^，。；！？、\s\d的]{1,6}?)(?=[，。；！？、\s]|$))?")
_ITEM_UNITS = re.compile(r"分论点|论点|论据|事例|例子|实例|论证方法|说明方法|修辞手法")


def _pieces(text: str) -> Iterator[Constraint]:
    for m in _PIECE_RX.finditer(text):
        first = count_range(m["n"])
        second = count_range(m["n2"]) if m["n2"] else first
        if first is None or second is None or (m["obj"] and _ITEM_UNITS.match(m["obj"])):
            continue  # 三条论据 is an evidence count (style), found by _ITEM_RX
        lo, hi = min(first[0], second[1]), max(first[0], second[1])
        if hi < 2:
            continue
        pre = m["pre"] or ""
        at_least, at_most = bool(re.fullmatch(_MIN, pre)), bool(re.fullmatch(_MAX, pre))
        start, end = m.span()
        if m["obj"] is None:
            end = m.end("unit")
        yield Constraint("count", text[start:end], (start, end),
                         min_count=None if at_most else lo,
                         max_count=None if at_least and lo == hi else hi,
                         target=m["obj"], unit=m["unit"])


def find_quantities(text: str) -> Iterator[Constraint]:
    """Lengths, then paragraph counts, argument/example/technique counts, piece counts."""
    yield from _lengths(text)
    yield from _counts(text, _PARA_RX, "paragraphs")
    yield from _counts(text, _ITEM_RX, "style")
    yield from _pieces(text)
