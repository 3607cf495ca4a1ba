"""The catalog's DuckDB file, attached to one in-process DuckDB instance for each use.

``duckdb.connect(path)`` builds a whole database instance (its catalog of built-in
functions, its thread pool) and ``close()`` tears it down again: 15-20 ms of CPU each time,
measured on this project's catalog, against 4-7 ms to ``ATTACH`` the same file to an
instance that already exists and ``DETACH`` it after. The store opens its catalog for every
stage run's start, snapshot and finish and for every lookup (1,816 times in the stage tests,
a third of their CPU), so each process keeps one in-memory instance (the *hub*) and attaches
the catalog to it for exactly as long as a ``duckdb.connect`` used to be open. Detaching
checkpoints and closes the file like ``close()`` did, DuckDB's own file lock included, so
other processes open it between uses as before; the store's lock files (``lock.py``,
``readonly.py``) still decide who may use it when.

Each use gets a cursor of its own (a DuckDB connection to the hub) whose default database
is the attached file (``USE``), so unqualified table names mean the catalog's tables.
Readers of the same file in several threads of one process share one read-only attachment
(DuckDB refuses to attach a file twice); a writer's attachment is never shared (the
exclusive lock keeps other users of the file out while it is attached).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb


@dataclass
class _Attachment:
    key: str  # the file's resolved path
    alias: str
    read_only: bool
    users: int


class _Hub:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.con = duckdb.connect(":memory:")
        self.attached: dict[str, _Attachment] = {}


_lock = threading.Lock()
_names = itertools.count()
_hub: _Hub | None = None


def _the_hub() -> _Hub:
    global _hub
    if _hub is None or _hub.pid != os.getpid():  # a forked child builds its own
        _hub = _Hub()
    return _hub


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _attach(path: Path, read_only: bool) -> tuple[_Hub, _Attachment]:
    key = str(path.resolve())
    with _lock:
        hub = _the_hub()
        held = hub.attached.get(key)
        if held is not None:
            if not (read_only and held.read_only):
                how = "read-only" if held.read_only else "for writing"
                raise RuntimeError(f"{path} is already open {how} in this process: a store "
                                   "use nested inside another")
            held.users += 1
            return hub, held
        attachment = _Attachment(key, f"eb_attached_{next(_names)}", read_only, 1)
        mode = " (READ_ONLY)" if read_only else ""
        cur = hub.con.cursor()
        try:
            cur.execute(f"ATTACH {_sql_text(key)} AS {attachment.alias}{mode}")
        finally:
            cur.close()
        hub.attached[key] = attachment
        return hub, attachment


def _release(hub: _Hub, attachment: _Attachment) -> None:
    with _lock:
        attachment.users -= 1
        if attachment.users:
            return
        del hub.attached[attachment.key]
        cur = hub.con.cursor()
        try:
            cur.execute(f"DETACH {attachment.alias}")  # checkpoints and closes the file
        finally:
            cur.close()


@contextmanager
def attached(path: Path, *, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection whose default database is the DuckDB file at ``path`` (created when
    missing, unless ``read_only``), open until the block ends. The caller holds whatever
    lock makes the use safe."""
    hub, attachment = _attach(path, read_only)
    try:
        with _lock:
            con = hub.con.cursor()
        try:
            con.execute(f"USE {attachment.alias}")
            yield con
        finally:
            con.close()
    finally:
        _release(hub, attachment)
