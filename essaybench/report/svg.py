"""matplotlib figures as inline SVG for a self-contained page, with a CJK font when there is one.

Text is drawn as glyph outlines (``svg.fonttype: path``), so a chart shows Chinese the same
on a machine without any CJK font; the font matters only here, where the chart is drawn.
Without one, charts label genres by their English names (never tofu boxes) and the report
says so. The SVG is cut down to what an HTML page needs: no XML prolog, metadata, comments
or namespace URLs, and its ids prefixed so several charts can share one page.
"""

from __future__ import annotations

import io
import re
import unicodedata
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import matplotlib
from matplotlib import font_manager
from matplotlib.figure import Figure

# Simplified-Chinese faces first; any CJK face will do for the few labels charts carry.
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "Source Han Sans CN",
             "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "Microsoft YaHei", "PingFang SC",
             "SimHei", "Noto Sans CJK JP", "Noto Sans CJK TC")
LATIN_FONT = "DejaVu Sans"  # matplotlib's own: always there

_PROLOG = re.compile(r"^.*?(?=<svg\b)", re.DOTALL)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)
_COMMENT = re.compile(r"<!--.*?-->\s*", re.DOTALL)
_XMLNS = re.compile(r'\s+xmlns(?::\w+)?="[^"]*"')
_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(href="#|url\(#)([^")]+)')
# A glyph outline: <path id="<font>-<glyph index>" d="…" transform="scale(…)"/> (markers and
# clip paths have no dash in their ids).
_GLYPH_DEF = re.compile(r'<path id="([^"]+-[0-9a-f]+)" d=')
_GLYPH_ELEMENT = re.compile(r'<path id="([^"]+-[0-9a-f]+)" d="[^"]*"(?: transform="[^"]*")?/>\s*')
_SPACE = re.compile(r"\s*\n\s*")
# Nothing that runs, links out or embeds a raster (an <image> is a data: URL): vector only.
_UNSAFE = re.compile(r"<script|<foreignObject|<image|javascript:|\bon\w+=|https?:",
                     re.IGNORECASE)


@lru_cache(maxsize=1)
def cjk_font() -> str | None:
    """The name of an installed CJK font matplotlib can draw with; None when there is none."""
    found = _cjk_font_known()
    if found is None and _add_system_cjk_fonts():
        found = _cjk_font_known()
    return found


def _cjk_font_known() -> str | None:
    installed = {f.name for f in font_manager.fontManager.ttflist}
    preferred = [name for name in CJK_FONTS if name in installed]
    if preferred:
        return preferred[0]
    return next((name for name in sorted(installed) if "CJK" in name), None)


def _add_system_cjk_fonts() -> bool:
    """Matplotlib lists fonts once and caches the list on disk: a CJK font installed after
    that (as font_note advises) stays unseen. Look on disk for one and add it."""
    added = False
    for path in font_manager.findSystemFonts():
        if "cjk" in Path(path).name.lower():
            try:
                font_manager.fontManager.addfont(path)
            except (OSError, RuntimeError, ValueError):  # unreadable or not a font
                continue
            added = True
    return added


def font_note() -> str | None:
    """What the reader should know about the charts' fonts (None: nothing)."""
    if cjk_font() is not None:
        return None
    return ("No CJK font was found when the charts were drawn, so they label genres in "
            "English; install one (Debian: apt-get install fonts-noto-cjk) for Chinese "
            "labels. The tables and essays are text, shown with the reader's fonts.")


def label(english: str, chinese: str | None) -> str:
    """A chart label with its Chinese name when a CJK font can draw it."""
    return f"{english} {chinese}" if chinese and cjk_font() is not None else english


@contextmanager
def chart_style() -> Iterator[None]:
    """Deterministic SVG (fixed hash salt, no date) in the report's style."""
    families = [LATIN_FONT, *([cjk] if (cjk := cjk_font()) else [])]
    with matplotlib.rc_context({
        "svg.fonttype": "path", "svg.hashsalt": "essaybench-report",
        "font.family": families, "font.size": 9, "axes.titlesize": 10,
        "axes.spines.top": False, "axes.spines.right": False,
        "axes.unicode_minus": False, "figure.dpi": 72,
        "figure.constrained_layout.use": False,
        # A title sits at the top of its axes (nothing is drawn above one): skips
        # matplotlib's search for a free position, a third of a 15-panel chart's time.
        "axes.titley": 1.0,
    }):
        yield


def text_width_in(text: str, size_pt: float) -> float:
    """About how wide ``text`` is drawn, in inches (a wide CJK character is 1 em, any
    other 0.6 em): margins are set from it, since a layout engine costs a second draw."""
    ems = sum(1.0 if unicodedata.east_asian_width(c) in "WF" else 0.6 for c in text)
    return ems * size_pt / 72


def fit_margins(fig: Figure, ylabels: Sequence[str], size_pt: float = 9, *,
                top_in: float = 0.35, bottom_in: float = 0.5, right_in: float = 0.2) -> None:
    """Room at the left for the longest y tick label, and for a title and an x label."""
    width, height = fig.get_size_inches()
    left_in = 0.25 + max((text_width_in(t, size_pt) for t in ylabels), default=0.3)
    fig.subplots_adjust(left=min(0.6, left_in / width), right=1 - right_in / width,
                        top=1 - top_in / height, bottom=bottom_in / height)


@dataclass
class ChartIds:
    """A page's charts: each gets its own id prefix, and a glyph outline already defined by
    an earlier chart of the page is not defined again (ids are page-wide: a ``<use>`` in
    one inline SVG can draw a glyph another one defines)."""

    count: int = 0
    glyphs: set[str] = field(default_factory=set)

    def next(self) -> str:
        self.count += 1
        return f"c{self.count}"


def _share_glyphs(svg: str, ids: ChartIds, prefix: str) -> str:
    """Prefix the chart's own ids with ``prefix`` and its glyphs' with ``g-``; drop the
    glyph definitions the page already has."""
    glyphs = set(_GLYPH_DEF.findall(svg))

    def new_id(name: str) -> str:
        return f"g-{name}" if name in glyphs else f"{prefix}-{name}"

    def glyph_def(m: re.Match[str]) -> str:
        if m.group(1) in ids.glyphs:
            return ""
        ids.glyphs.add(m.group(1))
        return m.group(0)

    svg = _GLYPH_ELEMENT.sub(glyph_def, svg)
    svg = _ID.sub(lambda m: f'id="{new_id(m.group(1))}"', svg)
    return _REF.sub(lambda m: f"{m.group(1)}{new_id(m.group(2))}", svg)


def inline_svg(fig: Figure, ids: ChartIds) -> str:
    """``fig`` as an ``<svg>`` element for an HTML page of charts numbered by ``ids``."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    svg = _PROLOG.sub("", buffer.getvalue(), count=1)
    svg = _COMMENT.sub("", _METADATA.sub("", svg))
    svg = _XMLNS.sub("", svg).replace("xlink:href=", "href=")
    svg = _SPACE.sub(" ", _share_glyphs(svg, ids, ids.next()))
    # Labels are drawn as outlines, so no run data reaches the SVG as text or markup;
    # checked anyway, since the page's safety rests on it.
    if _UNSAFE.search(svg):
        raise ValueError("chart SVG carries script, an event handler, an image or a URL")
    return svg.replace("<svg ", '<svg role="img" ', 1).strip()
