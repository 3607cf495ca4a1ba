"""Arabic and Chinese numerals as they appear in prompts (800, 1,000, 1.5万, 八百, 一千二)."""

from __future__ import annotations

import re

CN_DIGIT = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5,
            "六": 6, "七": 7, "八": 8, "九": 9}
CN_UNIT = {"十": 10, "百": 100, "千": 1000}
_FULLWIDTH_DIGITS = str.maketrans("０１２３４５６７８９", "0123456789")
NUM = (r"(?:\d+(?:,\d{3})*(?:\.\d+)?\s*[千万]?"
       r"|[一二两三四五六七八九十百千万][零〇一二两三四五六七八九十百千万]*)")


def parse_number(token: str) -> int | None:
    """800, 1,000, 1.5万, 八百, 一千二 (=1200), 两万; None if not a single number."""
    token = token.translate(_FULLWIDTH_DIGITS).replace(",", "").replace(" ", "")
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([千万]?)", token)
    if m:
        return round(float(m.group(1)) * {"": 1, "千": 1000, "万": 10000}[m.group(2)])
    high, sep, low = token.partition("万")
    if not sep:
        return _cn_below_10000(token)
    high_value = _cn_below_10000(high) if high else 1
    if high_value is None or "万" in low:
        return None
    if low in CN_DIGIT:  # 一万五 = 15000
        return high_value * 10000 + CN_DIGIT[low] * 1000
    low_value = _cn_below_10000(low) if low else 0
    return None if low_value is None else high_value * 10000 + low_value


def _cn_below_10000(s: str) -> int | None:
    total, digit, last_unit, after_zero = 0, None, 10000, False
    for ch in s:
        if ch in CN_DIGIT:
            if digit is not None:
                return None  # 五六 is a range, handled by the callers that allow it
            digit = CN_DIGIT[ch] or None
            after_zero = after_zero or digit is None
        elif ch in CN_UNIT and CN_UNIT[ch] < last_unit:
            total += (digit or 1) * CN_UNIT[ch]
            digit, last_unit = None, CN_UNIT[ch]
        else:
            return None
    if digit is not None:  # 八百五 = 850, 一千二 = 1200, but 一百零五 = 105
        total += digit * (last_unit // 10 if last_unit in (100, 1000) and not after_zero else 1)
    return total


def count_range(token: str) -> tuple[int, int] | None:
    """A small count: 三, 12, or two adjacent digits read as a range (一两 = 1–2)."""
    if len(token) == 2 and all(c in CN_DIGIT for c in token):
        lo, hi = CN_DIGIT[token[0]], CN_DIGIT[token[1]]
        return (lo, hi) if 0 < lo < hi <= lo + 2 else None
    n = parse_number(token)
    return None if n is None else (n, n)

