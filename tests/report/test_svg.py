"""Charts as inline SVG: nothing a page would load, ids that cannot collide, each glyph
outline defined once per page, and Chinese drawn with an installed CJK font."""

from __future__ import annotations

import re

import pytest
from matplotlib import font_manager
from matplotlib.figure import Figure

from essaybench.report.svg import ChartIds, chart_style, cjk_font, font_note, inline_svg, label


def _chart(ids: ChartIds, title: str) -> str:
    with chart_style():
        fig = Figure(figsize=(3, 2))
        ax = fig.add_subplot()
        ax.plot([0, 1], [1, 0])
        ax.set_title(title)
        return inline_svg(fig, ids)


def test_a_chart_is_an_svg_element_with_no_url_and_its_own_ids() -> None:
    ids = ChartIds()
    first, second = _chart(ids, "Ab"), _chart(ids, "Ab")
    for svg in (first, second):
        assert svg.startswith('<svg role="img" ') and svg.endswith("</svg>")
        assert "<?xml" not in svg and "<!--" not in svg and "metadata" not in svg
        assert "http" not in svg and "xmlns" not in svg and "xlink:" not in svg
    own = [set(re.findall(r'id="(c\d+)-', svg)) for svg in (first, second)]
    assert own == [{"c1"}, {"c2"}]
    # Every reference points at an id the page defines.
    page = first + second
    defined = set(re.findall(r'id="([^"]+)"', page))
    assert set(re.findall(r'href="#([^"]+)"', page)) <= defined
    assert set(re.findall(r"url\(#([^)]+)\)", page)) <= defined


def test_a_glyph_is_defined_once_per_page() -> None:
    ids = ChartIds()
    first, second = _chart(ids, "Ab"), _chart(ids, "Ab")
    glyphs = re.findall(r'<path id="(g-[^"]+)"', first)
    assert glyphs and not re.findall(r'<path id="g-', second)
    assert set(re.findall(r'href="#(g-[^"]+)"', second)) <= set(glyphs)
    assert len(second) < len(first)


def test_chinese_labels_are_drawn_with_a_cjk_font() -> None:
    font = cjk_font()
    if font is None:  # ./dev test installs fonts-noto-cjk; without it, English labels
        assert font_note() is not None and label("narrative", "记叙文") == "narrative"
        pytest.skip("no CJK font installed: charts fall back to English labels")
    assert font_note() is None and label("narrative", "记叙文") == "narrative 记叙文"
    svg = _chart(ChartIds(), "记叙文")
    outlines = re.findall(r'<path id="g-([^"]+)"', svg)
    cjk_face = font.replace(" ", "")
    assert any(cjk_face.lower()[:12] in name.lower() for name in outlines), outlines


def test_a_chart_that_would_link_out_is_refused() -> None:
    with chart_style():
        fig = Figure(figsize=(2, 1))
        fig.add_subplot().text(0.5, 0.5, "x", url="https://example.invalid/")
        with pytest.raises(ValueError, match="URL"):
            inline_svg(fig, ChartIds())


def test_a_cjk_font_installed_after_matplotlib_listed_fonts_is_found(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Matplotlib caches its font list on disk; a font installed later (as font_note
    advises) is found on disk all the same, not left out until the cache is deleted."""
    on_disk = [p for p in font_manager.findSystemFonts() if "cjk" in p.lower()]
    if not on_disk:
        pytest.skip("no CJK font file on this machine")
    stale = [f for f in font_manager.fontManager.ttflist if "CJK" not in f.name]
    monkeypatch.setattr(font_manager.fontManager, "ttflist", stale)  # the list from before
    cjk_font.cache_clear()
    try:
        assert cjk_font() is not None and "CJK" in (cjk_font() or "")
    finally:
        cjk_font.cache_clear()
