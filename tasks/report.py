"""Prefect task that writes a run's HTML report and attaches a summary to the flow run.

The page is ``<store>/reports/<run>/report.html`` (``essaybench.report``); the artifact
(key ``report-<run id>``) is a short Markdown summary — the overall score intervals — and
the page's path. A report that cannot be written is logged and returned as None: the
run's results are in the store whatever happens to their presentation.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from essaybench.core.activity import doing
from essaybench.core.export import markdown_grid
from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S
from essaybench.store import Store
from essaybench.tasks.alerts import artifact_key


def _num(value: float | None) -> str:
    """A mean or bound; a cell with too few essays has none."""
    return "—" if value is None else f"{value:.2f}"


def summary_markdown(run_id: str, path: Path) -> str:
    lines = [f"# Report: run {run_id}", "", f"The whole report (open from disk, no network): "
             f"`{path}`", ""]
    cis = path.parent / "stats" / "score_ci_weighted.parquet"
    if cis.is_file():
        overall = pl.read_parquet(cis).filter(pl.col("cell") == "overall").sort(
            "judge", "mean", descending=[False, True])
        rows = [[str(r["judge"]), str(r["model"]), _num(r["mean"]),
                 f"[{_num(r['ci_lo'])}, {_num(r['ci_hi'])}]" if r["ci_lo"] is not None
                 else str(r.get("ci_note") or "—"), str(r["n"])]
                for r in overall.iter_rows(named=True)]
        lines += ["Overall weighted score, 95% CI (t-interval, prompts as clusters):", "",
                  markdown_grid(["judge", "model", "mean", "95% CI", "n"], rows)]
    return "\n".join(lines) + "\n"


@task(name="report", cache_policy=NO_CACHE, task_run_name="report")
def report_task(run_id: str, store_root: str,
                lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> str | None:
    log = get_run_logger()
    try:
        with doing("report"):  # no stage row: a progress display names it all the same
            from essaybench.report import write_report  # matplotlib: only where a page is made

            path = write_report(Store(store_root, lock_timeout_s), run_id)
        create_markdown_artifact(markdown=summary_markdown(run_id, path),
                                 key=artifact_key(run_id, "report"),
                                 description=f"Report of run {run_id}")
    except Exception as exc:  # presentation only: the run's results are in the store
        log.error("report: not written: %s: %s", type(exc).__name__, exc)
        return None
    log.info("report: %s", path)
    return str(path)
