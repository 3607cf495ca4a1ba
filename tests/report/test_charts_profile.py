"""The score-against-length scatter: every essay up to its limit, a seeded sample past it
(said in the title), the OLS line drawn from the stats stage's fit either way."""

from __future__ import annotations

import re

import polars as pl

from essaybench.report.charts_profile import length_scatter_chart
from essaybench.report.svg import ChartIds

POINTS = pl.DataFrame({"model": ["a"] * 30 + ["b"] * 20, "length_chars": list(range(50)),
                       "score": [float(i % 7) for i in range(50)]})


def _placed_marks(svg: str) -> int:
    """Markers placed at a point (scatter points, legend keys and tick marks)."""
    return len(re.findall(r'<use [^>]*\bx="', svg))


def test_past_its_limit_the_scatter_draws_a_seeded_sample_and_says_so() -> None:
    every = length_scatter_chart(ChartIds(), "j", POINTS, (0.5, 10.0), max_points=50)
    sample = length_scatter_chart(ChartIds(), "j", POINTS, (0.5, 10.0), max_points=20)
    again = length_scatter_chart(ChartIds(), "j", POINTS, (0.5, 10.0), max_points=20)
    assert every is not None and sample is not None
    assert _placed_marks(every) - _placed_marks(sample) == 50 - 20
    assert sample == again  # seeded: the same page from the same run
    # The title is drawn as glyph outlines; its length tells the sampled one apart.
    assert sample.count("<use") - _placed_marks(sample) > (
        every.count("<use") - _placed_marks(every))
