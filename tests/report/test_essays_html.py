"""The drill-down's markup (essays_html): every string from the run reaches the page as
text, whatever it holds; numbers are written as the template's filters write them."""

from __future__ import annotations

from html.parser import HTMLParser

from essaybench.report.drilldown import EssayView, JudgmentView, PromptView, TraitScores
from essaybench.report.essays_html import escape, essays_html

EVIL = '"><script>alert(1)</script><img src=x onerror=\'y\'>&amp;'
MARKUP_TAGS = {"article", "h3", "code", "span", "div", "p", "details", "summary", "dl", "dt",
               "dd", "h4", "table", "tbody", "tr", "th", "td", "b"}


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: list[str] = []
        self.text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes += [f"{k}={v}" for k, v in attrs]

    def handle_data(self, data: str) -> None:
        self.text += data


def _hostile_prompt() -> PromptView:
    judgment = JudgmentView(
        judge=f"j{EVIL}", status=f"parse_error{EVIL}", score_weighted=71.25,
        score_unweighted=70.0, analysis=f"analysis{EVIL}", error=f"error{EVIL}",
        traits=[TraitScores(f"trait{EVIL}", [(f"q{EVIL}", f"7{EVIL}")])],
        flags=[f"flag{EVIL}"], essay_genre=f"genre{EVIL}", genre_source="judge",
        second_judge=f"second{EVIL}", second_status=f"api_error{EVIL}",
        second_error=f"refused{EVIL}")
    essay = EssayView(
        model=f"m{EVIL}", sample_index=2, status=f"ok{EVIL}", row_status=f"judge {EVIL}",
        error=f"why{EVIL}", text=f"essay{EVIL}", grid_chars=812, chinese_chars=790,
        verdict=f"over_{EVIL}", deviation=0.25, off_language=True,
        finish_reason=f"length{EVIL}", latency_s=1.5, cost_usd=0.000123,
        judgments=[judgment])
    return PromptView(prompt_id=f"p{EVIL}", genre=f"g{EVIL}", genre_zh=f"记叙{EVIL}",
                      prompt_set=f"open{EVIL}", text=f"prompt{EVIL}",
                      requirement=f"about 800 characters{EVIL}",
                      constraints=[(f"kind{EVIL}", f"words{EVIL}")], essays=[essay],
                      allowed_genres=f"any{EVIL}")


def test_every_run_string_is_text_and_nothing_else_is_markup() -> None:
    page = _Page()
    page.feed(str(essays_html([_hostile_prompt()])))
    assert page.tags <= MARKUP_TAGS  # no script, no img: nothing the run wrote
    assert not any(a.startswith("onerror") or a.startswith("src") for a in page.attributes)
    for field in ("j", "parse_error", "analysis", "error", "trait", "q", "7", "flag",
                  "genre", "second", "refused", "m", "why", "essay", "length", "p", "g",
                  "记叙", "open", "prompt", "about 800 characters", "kind", "words", "any"):
        assert f"{field}{EVIL}" in page.text, field
    # attribute values carry the strings whole, never a new attribute
    assert f"data-model=m{EVIL}" in page.attributes
    assert f"data-status=judge {EVIL}" in page.attributes


def test_numbers_are_written_as_the_template_filters_write_them() -> None:
    page = _Page()
    page.feed(str(essays_html([_hostile_prompt()])))
    for shown in ("weighted 71.25 · w/o WT 70.00", "812 chars", "(25%)", "#2",
                  "1.50 s · 0.000123 USD", "812 grid characters, 790 Chinese"):
        assert shown in page.text, shown


def test_escape_spells_entities_as_jinja_does() -> None:
    assert escape("<a href=\"x\">'&'</a>") == (
        "&lt;a href=&#34;x&#34;&gt;&#39;&amp;&#39;&lt;/a&gt;")
