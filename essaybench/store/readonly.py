"""Reading a store's DuckDB files without writing anything, not even a lock file.

A read-only DuckDB connection never creates or changes its file, but while it is open a
writer in another process cannot open the file at all ("Could not set lock on file"),
and neither can this reader while a writer has it. So a reader takes a *shared* lock on
the writers' lock file (``lock.py`` takes it exclusively, and polls): it waits for a
writer's short catalog transaction to end, never for longer than ``wait_s``, and a
writer that comes while it reads waits a moment instead of failing. The ledger is held
by its writer for a whole run, so its readers pass ``wait_s=0`` and do without.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import duckdb

from essaybench.store.attach import attached
from essaybench.store.lock import (
    StoreBusyError,
    format_seconds,
    holder_text,
    wait_for_flock,
    waiting_reporter,
)


@contextmanager
def _shared_lock(lock_path: Path, what: str, wait_s: float, poll_s: float) -> Iterator[None]:
    try:
        fd = os.open(lock_path, os.O_RDONLY)  # never O_CREAT: a reader creates nothing
    except FileNotFoundError:
        yield  # no writer has ever locked this store
        return
    try:
        if not wait_for_flock(fd, fcntl.LOCK_SH, wait_s, poll_s,
                              waiting_reporter(lock_path, what, wait_s)):
            raise StoreBusyError(
                f"{what} is being written: {holder_text(lock_path, 'has held its lock')}"
                + (f"; gave up after {format_seconds(wait_s)}: wait for it to finish or pass "
                   "a longer --lock-timeout" if wait_s > 0 else ""))
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextmanager
def read_only(db_path: Path, lock_path: Path, what: str, *, wait_s: float = 10.0,
              poll_s: float = 0.05, attach: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to ``db_path``; ``FileNotFoundError`` when it does not exist,
    ``StoreBusyError`` when a writer holds it for longer than ``wait_s``. ``attach``: the
    file attached to this process's DuckDB instance (``attach.py``; the catalog, opened
    often) instead of a database instance of its own."""
    if not db_path.is_file():
        raise FileNotFoundError(f"no {what} at {db_path}")
    with _shared_lock(lock_path, f"{what} {db_path}", wait_s, poll_s), ExitStack() as stack:
        try:
            con = stack.enter_context(attached(db_path, read_only=True)) if attach \
                else stack.enter_context(duckdb.connect(str(db_path), read_only=True))
        except duckdb.Error as exc:  # held by a process outside the lock protocol
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise StoreBusyError(f"cannot read {what} {db_path}: {first}") from None
        yield con


def older_schema(exc: duckdb.Error) -> bool:
    """Whether ``exc`` says a table or column a query reads is missing: a file written by
    an older essaybench (a writer migrates it). Other binder errors (a negative LIMIT, a
    type that does not fit) are not that."""
    text = str(exc)
    if isinstance(exc, duckdb.CatalogException):
        return "does not exist" in text
    return isinstance(exc, duckdb.BinderException) and (
        "Referenced column" in text or "not found" in text)
