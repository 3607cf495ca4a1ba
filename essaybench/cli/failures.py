"""A failed run, told in a few lines and exit code 1 (no traceback).

Two ways a benchmark run fails: a stage raised (``StageFailed``: the flow run ends
Failed, the catalog row holds the traceback), or every stage did its job but the run's
coverage is below its floor (``RunUnhealthy``: the explanation names the cells, the
causes and the rerun command). Either way the user gets what happened and what to run.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console

from essaybench.cli.common import STATE
from essaybench.core.redact import redact

# The stage a rerun starts from when a stage after the rerunnable ones failed.
_RERUN_FROM = {"drift": "judge", "pairwise": "aggregate", "stats": "aggregate",
               "alerts": "aggregate"}


@contextmanager
def failed_run_exits(config: Path, store: Path) -> Iterator[None]:
    """Turn a failed run into its explanation on stderr and exit code 1. ``config`` and
    ``store`` (when not the defaults) go into the rerun command of a stage that raised.
    A stage that raised for the user's mistake (a bad input file, a missing key variable)
    is left to ``cli.errors``: one ``error:`` line, exit code 2."""
    from essaybench.bench.health import RunUnhealthy, rerun_command
    from essaybench.core.settings import DEFAULT_BENCHMARK_CONFIG, DEFAULT_STORE_ROOT
    from essaybench.runs.health import unless_default
    from essaybench.stages.pipeline import BENCHMARK_STAGES
    from essaybench.store.run_stage import StageFailed

    # soft_wrap: the terminal wraps long lines, so the rerun command copies as one line.
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        yield
    except RunUnhealthy as exc:
        _traceback_if_debug(exc)
        err.print(f"run failed: {exc.explanation}", markup=False)
        page = store / "reports" / exc.health.run_id / "report.html"
        if page.is_file():  # written before the verdict: it shows what went wrong
            err.print(f"report: {page}", markup=False)
        raise typer.Exit(1) from None
    except StageFailed as exc:
        if exc.user_error is not None:
            raise
        _traceback_if_debug(exc)
        err.print(f"run failed: {redact(str(exc)).splitlines()[0]}", markup=False)
        stage = _RERUN_FROM.get(exc.stage, exc.stage)
        if exc.run_id and stage in BENCHMARK_STAGES:
            err.print("after fixing the cause, rerun (what succeeded is not redone):\n  "
                      + rerun_command(exc.run_id, stage,
                                      unless_default(str(config), DEFAULT_BENCHMARK_CONFIG),
                                      unless_default(str(store), DEFAULT_STORE_ROOT)),
                      markup=False)
        raise typer.Exit(1) from None


def _traceback_if_debug(exc: BaseException) -> None:
    if STATE.debug:
        sys.stderr.write(redact("".join(traceback.format_exception(exc))))
