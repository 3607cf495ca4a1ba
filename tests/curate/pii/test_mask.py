"""Properties of de-identification: a planted identifier never survives, whatever text
surrounds it; the numbers of an essay prompt (lengths, years, dates, quantities) are never
masked, next to an identifier or not."""

from __future__ import annotations

from datetime import date, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from stdnum import luhn
from stdnum.cn import ric

from essaybench.curate.pii import PLACEHOLDERS, DeidParams, deidentify

# Filler without surname characters or cue words: it can never form a name.
FILLER = st.text(alphabet="的一了不在有人这上大来到个以们中为要时出就也生年着下", min_size=0,
                 max_size=12)
PUNCT = st.sampled_from(["，", "。", "：", " ", "、", "（", "）", ""])


@st.composite
def phones(draw: st.DrawFn) -> str:
    digits = "1" + draw(st.sampled_from("3456789")) + "".join(
        draw(st.lists(st.sampled_from("0123456789"), min_size=9, max_size=9)))
    style = draw(st.sampled_from(["plain", "space", "dash", "+86", "fullwidth"]))
    if style == "space":
        return f"{digits[:3]} {digits[3:7]} {digits[7:]}"
    if style == "dash":
        return f"{digits[:3]}-{digits[3:7]}-{digits[7:]}"
    if style == "+86":
        return "+86 " + digits
    if style == "fullwidth":
        return digits.translate({ord(c): ord(c) + 0xFEE0 for c in "0123456789"})
    return digits


@st.composite
def id_cards(draw: st.DrawFn) -> str:
    area = draw(st.sampled_from(["110105", "310104", "440305", "510107", "330106"]))
    born = date(1950, 1, 1) + timedelta(days=draw(st.integers(0, 25000)))
    body = f"{area}{born:%Y%m%d}{draw(st.integers(0, 999)):03d}"
    return body + ric.calc_check_digit(body + "0")  # stdnum: "with the check digit included"


@st.composite
def bank_cards(draw: st.DrawFn) -> str:
    n = draw(st.sampled_from([16, 19]))
    body = "62" + "".join(draw(st.lists(st.sampled_from("0123456789"), min_size=n - 3,
                                        max_size=n - 3)))
    card = body + luhn.calc_check_digit(body)
    return " ".join(card[i:i + 4] for i in range(0, len(card), 4)) \
        if draw(st.booleans()) else card


emails = st.builds(lambda user, host: f"{user}@{host}.com",
                   st.from_regex(r"[a-z][a-z0-9._]{2,10}", fullmatch=True),
                   st.from_regex(r"[a-z]{2,8}", fullmatch=True))
IDENTIFIERS = st.one_of(phones(), id_cards(), bank_cards(), emails)


@settings(max_examples=300, deadline=None)
@given(before=FILLER, p1=PUNCT, ident=IDENTIFIERS, p2=PUNCT, after=FILLER)
def test_a_planted_identifier_never_survives(before: str, p1: str, ident: str, p2: str,
                                             after: str) -> None:
    text = f"{before}{p1}{ident}{p2}{after}"
    out = deidentify(text, DeidParams(names="off"))
    assert ident not in out.text
    digits = "".join(c for c in ident if c.isdigit())
    assert len(digits) < 11 or digits not in "".join(c for c in out.text if c.isdigit())
    assert sum(out.counts.values()) == 1 and any(p in out.text for p in PLACEHOLDERS.values())


PROMPT_NUMBERS = st.one_of(
    st.integers(100, 3000).map(lambda n: f"不少于{n}字"),
    st.tuples(st.integers(1, 20), st.integers(0, 9)).map(
        lambda t: f"{t[0] * 100}-{t[0] * 100 + 200 + t[1] * 100}字"),
    st.integers(1900, 2030).map(lambda y: f"{y}年"),
    st.dates(date(1900, 1, 1), date(2030, 12, 31)).map(lambda d: f"{d.month}月{d.day}日"),
    st.dates(date(1990, 1, 1), date(2030, 12, 31)).map(lambda d: f"{d:%Y.%m.%d}"),
    st.dates(date(1990, 1, 1), date(2030, 12, 31)).map(lambda d: f"{d:%Y-%m-%d}"),
    st.integers(1, 100).map(lambda n: f"满分{n}分"),
    st.integers(1, 99).map(lambda n: f"{n}%"),
    st.integers(1, 9).map(lambda n: f"初{'一二三'[n % 3]}({n})班"),
    st.integers(1, 999999).map(lambda n: f"约{n}人"),
    st.integers(1, 99999).map(lambda n: f"¥{n:,}.00"),
)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.tuples(FILLER, PROMPT_NUMBERS, PUNCT), min_size=1, max_size=5),
       ident=st.one_of(st.none(), IDENTIFIERS))
def test_the_numbers_of_an_essay_prompt_are_never_masked(
        parts: list[tuple[str, str, str]], ident: str | None) -> None:
    pieces = [f"{filler}{number}{punct}" for filler, number, punct in parts]
    text = "".join(pieces) + (f"，联系{ident}。" if ident else "")
    out = deidentify(text, DeidParams(names="cued"))
    for _, number, _ in parts:
        assert number in out.text  # no placeholder inside a requested length, a year, …
    assert sum(out.counts.values()) == (1 if ident else 0)
