"""What every command group shares: the console, the common options, Prefect's
environment, and table printing."""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import polars as pl
import typer
from rich.console import Console
from rich.table import Table

from essaybench.core.redact import install_log_redaction
from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S, DEFAULT_STORE_ROOT

if TYPE_CHECKING:
    from essaybench.store import Store

console = Console()


@dataclass
class CliState:
    """Options of the whole command line (``essaybench --debug CMD``), for this invocation."""

    debug: bool = False


STATE = CliState()

ConfigOpt = Annotated[Path, typer.Option("--config", help="Curate config (YAML).")]
StoreOpt = Annotated[Path, typer.Option("--store", help="Store folder (catalog + snapshots).")]
BenchOpt = Annotated[Path, typer.Option("--config", help="Benchmark config (YAML).")]
RunOpt = Annotated[str, typer.Option("--run", help="The run whose snapshots to read.")]
LockTimeoutOpt = Annotated[float, typer.Option(
    "--lock-timeout", metavar="SECONDS", min=0.0,
    help="How long to wait for another process's lock on the store (catalog, call ledger) "
         "before giving up; who holds it is shown while waiting.")]


def reader(store: Path, lock_timeout: float = DEFAULT_LOCK_TIMEOUT_S) -> Store:
    """The store, read only: nothing is created or changed (not even a lock file); a
    missing store is a ``NotFoundError``. Used by read-only commands, and by the checks
    a writing command makes before Prefect starts."""
    from essaybench.store import Store

    return Store(store, lock_timeout, read_only=True)


def check_new_store(store: Path) -> None:
    """Where a command that builds a store (curate, a run that curates first) may write:
    an existing store, or a new folder in a folder that exists. A path whose parent is
    missing (a typo), a file, or a folder of other files is refused in one line before
    anything is created; a new store is announced, so a typo that slips through is seen."""
    hint = "--store"
    if store.exists() and not store.is_dir():
        raise typer.BadParameter(f"{store} is a file, not a store folder", param_hint=hint)
    if store.is_dir():
        if (store / "catalog.duckdb").is_file() or not any(store.iterdir()):
            return
        raise typer.BadParameter(f"{store} is a folder of other files, not a store (no "
                                 "catalog.duckdb): name an existing store or a new folder",
                                 param_hint=hint)
    parent = store.absolute().parent
    default = store.absolute() == Path(DEFAULT_STORE_ROOT).absolute()  # made with its parents
    if not parent.is_dir() and not default:
        raise typer.BadParameter(f"no folder {parent} to make the store {store.name!r} in "
                                 "(a typo? a new store's parent folder must exist)",
                                 param_hint=hint)
    console.print(f"new store: {store.absolute()}", markup=False, soft_wrap=True)


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
    _quiet_prefect_console()
    # A temporary API server (no PREFECT_API_URL) dies with this process, even a killed one.
    from essaybench.cli.temp_server import watch_temporary_server

    watch_temporary_server()


class _NoTraceback(logging.Formatter):
    """Prefect's console formatter, minus tracebacks (unless --debug): the command ends
    with one line saying what went wrong (cli.errors); Prefect's API logs keep them."""

    def __init__(self, inner: logging.Formatter | None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        if STATE.debug:
            return self.inner.format(record)
        # The record is shared with the other handlers (the API's): put it back as it was.
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        try:
            return self.inner.format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved


def _engine_exception_report(record: logging.LogRecord) -> bool:
    """Keep a console record unless it is Prefect's engine reporting the exception of a
    task or flow run ("Task run failed with exception: …" and its traceback): the
    command's own last line says it (unless --debug)."""
    return STATE.debug or not (
        record.name.startswith(("prefect.flow_runs", "prefect.task_runs"))
        and (record.exc_info is not None or record.exc_text is not None))


def _task_run_chatter(record: logging.LogRecord) -> bool:
    """Drop a task run's INFO records from the console ("Created task run", "Finished in
    state Completed()"): the progress display says what is going on; Prefect's API
    keeps them. Warnings and errors pass."""
    return STATE.debug or not (record.name.startswith("prefect.task_runs")
                               and record.levelno <= logging.INFO)


def _quiet_prefect_console() -> None:
    from prefect.logging.configuration import ensure_logging_setup
    from prefect.logging.handlers import PrefectConsoleHandler

    ensure_logging_setup()
    handlers: list[Any] = list(logging.getLogger().handlers)
    for handler in handlers:
        if isinstance(handler, PrefectConsoleHandler) and not isinstance(
                handler.formatter, _NoTraceback):
            handler.setFormatter(_NoTraceback(handler.formatter))
            handler.addFilter(_engine_exception_report)
            handler.addFilter(_task_run_chatter)


def print_frame(df: pl.DataFrame, title: str, limit: int = 40) -> None:
    table = Table(title=title)
    for column in df.columns:
        table.add_column(column)
    for row in df.head(limit).iter_rows():
        table.add_row(*("—" if v is None or (isinstance(v, float) and math.isnan(v))
                        else f"{v:.3f}" if isinstance(v, float) else str(v) for v in row))
    console.print(table)


def counts_table(counts: dict[str, dict[str, int]], title: str) -> Table:
    table = Table(title=title)
    for col in ("genre", "open", "constrained", "total"):
        table.add_column(col, justify="left" if col == "genre" else "right")
    for genre, row in counts.items():
        table.add_row(genre, *(str(row.get(c, 0)) for c in ("open", "constrained", "total")),
                      style="bold" if genre == "total" else None)
    return table
