"""``essaybench report --run RUN``: RUN's report as one HTML page and its essays' folder.

    essaybench report --run RUN [--store S]    writes <store>/reports/RUN/report.html
                                                (and report_files/ beside it)

Inside a project (essaybench.toml) the page and its folder are also copied to the
project's reports folder, ``<reports>/RUN/report.html``, and that path is printed.

Reads the store only (no Prefect, no model calls); prints the page's path.
"""

from __future__ import annotations

from pathlib import Path

import typer

from essaybench.cli.common import LockTimeoutOpt, RunOpt, StoreOpt, reader
from essaybench.core.settings import (
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_REPORTS_DIR,
    DEFAULT_STORE_ROOT,
)

app = typer.Typer()


@app.command()
def report(run_id: RunOpt, store: StoreOpt = Path(DEFAULT_STORE_ROOT),
           lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S) -> None:
    """Write RUN's report page (leaderboard with CIs, Table 5 heatmaps, differences, traits,
    compliance, pairwise, costs, alerts and every essay) and print its path. It loads
    nothing from the network: open it from disk or mail it (with report_files/, the
    essays' texts, beside it)."""
    from essaybench.report import copy_report, write_report  # matplotlib: when used

    path = write_report(reader(store, lock_timeout), run_id)  # NotFoundError naming the run
    if DEFAULT_REPORTS_DIR is not None:  # a project's reports folder
        path = copy_report(path, Path(DEFAULT_REPORTS_DIR) / run_id)
    typer.echo(str(path))
