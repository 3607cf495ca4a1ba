"""A run's report as one self-contained HTML page: ``<store>/reports/<run>/report.html``.

Opened from disk or mailed (with ``report_files/``, the folder beside it), it loads
nothing from the network: charts are inline SVG (matplotlib, text as outlines so Chinese
shows without a CJK font on the reader's side), style and script are inline, the essays'
texts are chunk files in ``report_files/`` (``browser``), and its Content-Security-Policy
forbids any network load. Every text from the run (essays, prompts, judge analyses,
errors) is escaped or put on the page as text.

Contents: leaderboard with 95% CIs and indistinguishable groups; Table 5 (weighted, w/o
WT) as heatmaps with coverage; paired differences to the best model; trait profiles per
model and per genre × Open/Constrained; length compliance and off-language rates;
score–length per judge; pairwise win rates and Bradley–Terry ratings, and every
comparison (both essays side by side, each order's verdict and analysis); a decision table
(quality, cost, latency, failures, compliance); alerts, the comparison with the last
comparable run and judge drift; failures; and every essay in a browser that pages,
filters, sorts, searches and links to each. A part whose stage did not run says so.

Modules: ``data`` reads the store; ``tables``, ``labels``, ``drilldown``, ``browser`` and
``pairs`` shape it (pure); ``svg``, ``charts`` and ``charts_profile`` draw; ``sections``
and ``page`` fill in ``templates/report.html``; ``write`` writes the page and its chunks.
Never imports Prefect.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from essaybench.report.write import copy_report, report_path, write_report

__all__ = ["copy_report", "report_path", "write_report"]


def __getattr__(name: str) -> Any:
    """``write``'s functions, imported when first asked for: a process that needs only
    part of the package (``essays_job``'s child) does not load matplotlib with it."""
    if name in __all__:
        from essaybench.report import write

        return getattr(write, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
