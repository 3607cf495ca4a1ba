"""A catalog kept open for a burst of catalog work in this process (``Store.hold``).

Opening a DuckDB database costs ~20 ms here whatever it holds (the instance starts anew
each time the last connection closes), and ``Store.connect`` opens and closes the catalog
for every read and write: ~70 times in one weekly run, ~2 s of its wall time, most of it
in the stages after the LLM calls (judge → aggregate → stats → alerts → report), which run
back to back in one process. While a ``hold`` lasts, the catalog stays open under the
store's exclusive lock and every ``connect`` of this process, on any ``Store`` object and
any thread, takes a cursor of that one connection (its own transaction), one at a time.
Other processes wait for the lock as they wait for any writer, and say so.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb


@dataclass
class Held:
    con: duckdb.DuckDBPyConnection
    lock: threading.RLock = field(default_factory=threading.RLock)


_HELD: dict[Path, Held] = {}
_REGISTRY_LOCK = threading.Lock()


def key(catalog_path: Path) -> Path:
    return catalog_path.resolve()


def held(catalog_path: Path) -> Held | None:
    """The held connection of ``catalog_path``, if this process holds one."""
    if not _HELD:
        return None
    return _HELD.get(key(catalog_path))


def register(catalog_path: Path, con: duckdb.DuckDBPyConnection) -> bool:
    """Hold ``con`` for ``catalog_path``; False when it is held already (the caller then
    closes ``con`` and leaves the hold to the outer one)."""
    with _REGISTRY_LOCK:
        if key(catalog_path) in _HELD:
            return False
        _HELD[key(catalog_path)] = Held(con)
        return True


def release(catalog_path: Path) -> None:
    with _REGISTRY_LOCK:
        found = _HELD.pop(key(catalog_path), None)
    if found is not None:
        with found.lock:  # a cursor still in use on another thread finishes first
            found.con.close()


@contextmanager
def transaction(h: Held, begin: bool = True) -> Iterator[duckdb.DuckDBPyConnection]:
    """A cursor of the held connection, in a transaction of its own (committed at the end,
    rolled back on an error); one at a time in this process."""
    with h.lock:
        cur = h.con.cursor()
        try:
            if not begin:
                yield cur
                return
            cur.execute("BEGIN TRANSACTION")
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")
        finally:
            cur.close()
