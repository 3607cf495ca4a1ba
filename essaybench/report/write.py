"""``write_report``: a run's report page, written where its other reports are."""

from __future__ import annotations

from pathlib import Path

from essaybench.core.files import write_atomically
from essaybench.core.gcfreeze import collector_paused
from essaybench.report.data import load_run
from essaybench.report.page import report_pieces
from essaybench.store import Store

__all__ = [
    "REPORT_NAME", "report_path", "write_report",
]

REPORT_NAME = "report.html"


def report_path(store: Store, run_id: str) -> Path:
    return store.root / "reports" / run_id / REPORT_NAME


def write_report(store: Store, run_id: str) -> Path:
    """Write ``<store>/reports/<run_id>/report.html`` from the run's snapshots and return
    its path. Only reads the catalog (a read-only store will do); the page is replaced
    atomically, so a reader never opens half of it. The cyclic collector is paused while
    the page is made (core.gcfreeze: its passes were 2.0 of the 4.9 s the page took at
    the paper's scale)."""
    path = report_path(store, run_id)
    with collector_paused():
        pieces = report_pieces(load_run(store, run_id))
        return write_atomically(path, (piece.encode("utf-8") for piece in pieces))
