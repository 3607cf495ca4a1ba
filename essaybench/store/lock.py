"""One writer at a time per store.

DuckDB lets a single process hold a database file open for writing; a second
process gets "Could not set lock on file", even read-only. Rather than surface
that, every catalog access takes an exclusive advisory lock on a file beside
the catalog, waits up to a timeout, and then fails with a message that names
the store and the process holding it. Connections are held only inside the
lock, so a long stage never blocks another process's catalog writes for long.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class StoreBusyError(RuntimeError):
    """Another process held the store's lock for longer than the timeout."""


def wait_for_flock(fd: int, mode: int, timeout_s: float, poll_s: float) -> bool:
    """Take the advisory lock ``mode`` (``fcntl.LOCK_EX`` or ``LOCK_SH``) on ``fd``, polling
    for up to ``timeout_s``; False when it was still held by another process then."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)


@contextmanager
def exclusive_lock(lock_path: Path, timeout_s: float, poll_s: float = 0.05) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not wait_for_flock(fd, fcntl.LOCK_EX, timeout_s, poll_s):
            raise StoreBusyError(
                f"store {lock_path.parent} is busy: {_read_holder(lock_path)} held its lock "
                f"for more than {timeout_s:g} s; wait for it to finish or raise the lock "
                "timeout")
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}".encode())
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _read_holder(lock_path: Path) -> str:
    try:
        text = lock_path.read_text().strip()
    except OSError:
        text = ""
    return f"process {text}" if text else "another process"
