"""``hbars`` draws what ``barh`` draws (one collection instead of a patch per bar)."""

from __future__ import annotations

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from essaybench.report.charts import hbars


def _pixels(draw_new: bool, widths: list[float]) -> np.ndarray:
    fig = Figure(figsize=(3, 3))
    ax = fig.add_subplot()
    y = np.arange(len(widths))[::-1]
    color = (0.1, 0.4, 0.7, 1.0)
    if draw_new:
        hbars(ax, y, widths, height=0.7, color=color)
    else:
        ax.barh(y, widths, height=0.7, color=color)
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.6, len(widths) - 0.4)
    canvas = FigureCanvasAgg(fig)
    # matplotlib's backend_agg has no annotations (no .pyi, as of 3.11).
    canvas.draw()  # type: ignore[no-untyped-call]
    return np.asarray(canvas.buffer_rgba()).astype(int)  # type: ignore[no-untyped-call]


def test_hbars_draws_the_same_pixels_as_barh_a_nan_drawing_nothing() -> None:
    widths = [3.0, float("nan"), 7.5, 1.0, 9.0]
    same = _pixels(True, widths)
    assert np.array_equal(same, _pixels(False, widths))
    # and the comparison can fail: another width is other pixels
    assert not np.array_equal(same, _pixels(False, [3.0, float("nan"), 7.0, 1.0, 9.0]))
