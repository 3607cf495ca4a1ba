from __future__ import annotations

import polars as pl
import pytest

from essaybench.bench.compliance import check_length, compliance_rates, compliance_table


def essay(n: int) -> str:
    """An essay of exactly ``n`` grid cells: ideographs with a 。 every tenth cell."""
    return "".join("。" if i % 10 == 9 else "文" for i in range(n))


def test_essay_helper_counts() -> None:
    c = check_length("写一篇作文", essay(20))
    assert (c.grid_chars, c.chinese_chars) == (20, 18)


@pytest.mark.parametrize(("prompt", "n", "verdict", "deviation"), [
    ("写一篇议论文，不少于800字。", 799, "under", -1 / 800),
    ("写一篇议论文，不少于800字。", 800, "compliant", 0.0),
    ("写一篇议论文，不少于800字。", 5000, "compliant", 0.0),
    ("500字以内", 500, "compliant", 0.0),
    ("500字以内", 501, "over", 1 / 500),
    # 600字左右 with APPROX_TOLERANCE = 0.10 accepts 540..660
    ("写一篇600字左右的记叙文", 539, "under", -1 / 540),
    ("写一篇600字左右的记叙文", 540, "compliant", 0.0),
    ("写一篇600字左右的记叙文", 660, "compliant", 0.0),
    ("写一篇600字左右的记叙文", 661, "over", 1 / 660),
    ("300-500字", 299, "under", -1 / 300),
    ("300-500字", 300, "compliant", 0.0),
    ("300-500字", 500, "compliant", 0.0),
    ("300-500字", 550, "over", 0.1),
])
def test_length_verdicts(prompt: str, n: int, verdict: str, deviation: float) -> None:
    c = check_length(prompt, essay(n))
    assert c.grid_chars == n
    assert c.verdict == verdict
    assert c.deviation == pytest.approx(deviation)


def test_no_requirement() -> None:
    c = check_length("以《我的母亲》为题写一篇记叙文", essay(10))
    assert c.requirement is None
    assert (c.verdict, c.deviation) == ("no_requirement", None)


def test_grid_count_includes_punctuation_not_whitespace() -> None:
    # ASCII, ideographic (U+3000) and line-break whitespace never count
    text = "  春天来了，\n\n\u3000\u3000花开了！“真美。”\t"
    c = check_length("不少于10字", text)
    assert c.chinese_chars == 9  # 春天来了 花开了 真美
    assert c.grid_chars == 14  # + ， ！ “ 。 ”
    assert c.verdict == "compliant"  # the grid count decides: 9 ideographs would be "under"


def test_digits_and_latin_fill_one_cell_each() -> None:
    c = check_length("写一篇作文", "2024年AI来了。")
    assert (c.chinese_chars, c.grid_chars) == (3, 10)


def test_empty_essay_is_checked_as_zero_length() -> None:
    c = check_length("不少于800字", "")
    assert (c.grid_chars, c.verdict, c.deviation) == (0, "under", -1.0)


# --- tables -------------------------------------------------------------------------

def small_table() -> pl.DataFrame:
    rows = [
        # model a: 不少于800字 met / missed, 500字以内 over, no requirement, null essay
        ("a", "不少于800字", essay(800)),
        ("a", "不少于800字", essay(700)),
        ("a", "500字以内", essay(600)),
        ("a", "写一篇作文", essay(100)),
        ("a", "不少于800字", None),
        # model b: 300-500字 met, 600字左右 under
        ("b", "300-500字", essay(400)),
        ("b", "600字左右", essay(500)),
    ]
    return pl.DataFrame(rows, schema={"model": pl.String, "text": pl.String,
                                      "essay_text": pl.String}, orient="row")


def test_compliance_table_columns() -> None:
    t = compliance_table(small_table())
    assert t["req_min_chars"].to_list() == [800, 800, None, None, 800, 300, None]
    assert t["req_max_chars"].to_list() == [None, None, 500, None, None, 500, None]
    assert t["req_approx_chars"].to_list() == [None, None, None, None, None, None, 600]
    assert t["essay_grid_chars"].to_list() == [800, 700, 600, 100, None, 400, 500]
    assert t["essay_chars"].to_list() == [720, 630, 540, 90, None, 360, 450]
    assert t["length_verdict"].to_list() == [
        "compliant", "under", "over", "no_requirement", None, "compliant", "under"]
    dev = t["length_deviation"].to_list()
    assert dev[:2] == [0.0, pytest.approx(-0.125)]
    assert dev[2] == pytest.approx(0.2)
    assert dev[3:5] == [None, None]
    assert dev[6] == pytest.approx(500 / 540 - 1)


def test_compliance_table_empty() -> None:
    empty = pl.DataFrame(schema={"text": pl.String, "essay_text": pl.String})
    t = compliance_table(empty)
    assert t.height == 0
    assert t.schema["length_verdict"] == pl.String


def test_compliance_rates_hand_computed() -> None:
    r = compliance_rates(compliance_table(small_table()))
    a, b = r.to_dicts()
    # a: 4 rows with a requirement, one of them a null essay -> 3 checked
    assert (a["model"], a["n_essays"], a["n_with_requirement"], a["n_checked"]) == ("a", 5, 4, 3)
    assert a["compliance_rate"] == pytest.approx(1 / 3)
    assert a["over_rate"] == pytest.approx(1 / 3)
    assert a["under_rate"] == pytest.approx(1 / 3)
    assert a["mean_essay_grid_chars"] == pytest.approx((800 + 700 + 600 + 100) / 4)
    assert (b["model"], b["n_essays"], b["n_with_requirement"], b["n_checked"]) == ("b", 2, 2, 2)
    assert (b["compliance_rate"], b["over_rate"], b["under_rate"]) == (0.5, 0.0, 0.5)
    assert b["mean_essay_grid_chars"] == pytest.approx(450.0)


def test_compliance_rates_without_checked_essays_are_null() -> None:
    t = compliance_table(pl.DataFrame({"model": ["c", "c"], "text": ["写作文", "不少于800字"],
                                       "essay_text": [essay(10), None]}))
    (c,) = compliance_rates(t).to_dicts()
    assert (c["n_essays"], c["n_with_requirement"], c["n_checked"]) == (2, 1, 0)
    assert c["compliance_rate"] is None and c["over_rate"] is None and c["under_rate"] is None


def test_compliance_rates_by_two_keys() -> None:
    t = compliance_table(small_table()).with_columns(
        genre=pl.Series(["x", "x", "y", "y", "y", "x", "x"]))
    r = compliance_rates(t, by=("model", "genre"))
    assert r.select("model", "genre", "n_checked").rows() == [
        ("a", "x", 2), ("a", "y", 1), ("b", "x", 2)]


@pytest.mark.parametrize(("prompt", "n", "verdict"), [
    # issue 15: a title's, a summary's or a slogan's length is not the essay's
    ("题目不超过10个字，正文不少于800字", 900, "compliant"),
    ("题目不超过10个字，正文不少于800字", 700, "under"),
    ("不少于800字，并附50字以内的摘要", 900, "compliant"),
    ("写一篇200-300字左右的短文，再为它配一句10到20个字的宣传语", 250, "compliant"),
    ("写一篇200-300字左右的短文，再为它配一句10到20个字的宣传语", 301, "over"),
    # an unnamed length contradicting the body's is about something else
    ("不少于800字，不超过500字", 900, "compliant"),
    ("不少于800字，不超过500字", 600, "under"),
])
def test_only_the_body_length_is_checked(prompt: str, n: int, verdict: str) -> None:
    c = check_length(prompt, essay(n))
    assert c.requirement is not None and c.requirement.target == "body"
    assert c.verdict == verdict


def test_a_prompt_with_only_a_title_length_has_no_essay_requirement() -> None:
    c = check_length("写一篇记叙文，题目不超过10个字", essay(300))
    assert (c.requirement, c.verdict) == (None, "no_requirement")


def test_off_language_essays_are_counted_apart_from_length_compliance() -> None:
    """Issue 28: an English essay of 800 letters is not "compliant" with 不少于800字: its
    verdict is off_language, counted in n_off_language, out of the rates and mean lengths."""
    english = "word " * 200  # 800 letters: grid-compliant with 不少于800字 if counted
    rows = [("a", "不少于800字", essay(800), False), ("a", "不少于800字", essay(700), False),
            ("a", "不少于800字", english, True), ("a", "写一篇作文", english, True)]
    frame = pl.DataFrame(rows, schema={"model": pl.String, "text": pl.String,
                                       "essay_text": pl.String, "off_language": pl.Boolean},
                         orient="row")
    for table in (frame, frame.drop("off_language")):  # measured, or detected here
        t = compliance_table(table)
        assert t["length_verdict"].to_list() == ["compliant", "under", "off_language",
                                                 "off_language"]
        assert t["length_deviation"].to_list()[2:] == [None, None]
        (a,) = compliance_rates(t).to_dicts()
        assert (a["n_essays"], a["n_off_language"], a["n_checked"]) == (4, 2, 2)
        assert (a["compliance_rate"], a["under_rate"]) == (0.5, 0.5)
        assert a["mean_essay_grid_chars"] == 750.0
