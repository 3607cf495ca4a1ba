"""``write_report``: a run's report page, written where its other reports are."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from essaybench.report.data import load_run
from essaybench.report.page import render_report
from essaybench.store import Store

REPORT_NAME = "report.html"


def report_path(store: Store, run_id: str) -> Path:
    return store.root / "reports" / run_id / REPORT_NAME


def write_report(store: Store, run_id: str) -> Path:
    """Write ``<store>/reports/<run_id>/report.html`` from the run's snapshots and return
    its path. Only reads the catalog (a read-only store will do); the page is replaced
    atomically, so a reader never opens half of it."""
    page = render_report(load_run(store, run_id))
    path = report_path(store, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".html")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(page)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
