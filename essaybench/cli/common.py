"""What every command group shares: the console, the common options, Prefect's
environment, and table printing."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated

import polars as pl
import typer
from rich.console import Console
from rich.table import Table

from essaybench.core.redact import install_log_redaction

console = Console()

ConfigOpt = Annotated[Path, typer.Option("--config", help="Curate config (YAML).")]
StoreOpt = Annotated[Path, typer.Option("--store", help="Store folder (catalog + snapshots).")]
BenchOpt = Annotated[Path, typer.Option("--config", help="Benchmark config (YAML).")]
RunOpt = Annotated[str, typer.Option("--run", help="The run whose snapshots to read.")]


def prefect_env() -> None:
    # No network here or on most CI machines: keep Prefect from phoning home.
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    # The ephemeral API server's 20 s default start-up budget is too tight on a loaded
    # 2-core machine (measured: it timed out at load average 5).
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    # A log handler that cannot write (Prefect's console handler keeps the stream it was
    # set up with, which may be closed by now, e.g. a terminal gone or an earlier in-process
    # invocation) must not print its own traceback at the user: the run goes on, and its
    # record is in the catalog and the Prefect API either way.
    logging.raiseExceptions = False
    # Logs (Prefect's database among their handlers) never carry a key: an exception's
    # traceback may quote a provider's error body.
    install_log_redaction()


def print_frame(df: pl.DataFrame, title: str, limit: int = 40) -> None:
    table = Table(title=title)
    for column in df.columns:
        table.add_column(column)
    for row in df.head(limit).iter_rows():
        table.add_row(*("—" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)
                        for v in row))
    console.print(table)


def counts_table(counts: dict[str, dict[str, int]], title: str) -> Table:
    table = Table(title=title)
    for col in ("genre", "open", "constrained", "total"):
        table.add_column(col, justify="left" if col == "genre" else "right")
    for genre, row in counts.items():
        table.add_row(genre, *(str(row.get(c, 0)) for c in ("open", "constrained", "total")),
                      style="bold" if genre == "total" else None)
    return table
