"""One writer at a time per store.

DuckDB lets a single process hold a database file open for writing; a second
process gets "Could not set lock on file", even read-only. Rather than surface
that, every catalog access takes an exclusive advisory lock on a file beside
the catalog, waits up to a timeout, and then fails with a message that names
the store and the process holding it. Connections are held only inside the
lock, so a long stage never blocks another process's catalog writes for long.

The holder writes who it is into the lock file (pid, host, command, since when), so a
process that has to wait says, while it waits, who holds the lock and for how long
(a warning on this module's logger, which the command line prints), and its error names
the holder when it gives up.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from essaybench.core.errors import UserError
from essaybench.core.redact import redact
from essaybench.store.liveness import this_host

REPORT_AFTER_S = 1.0  # a wait shorter than this (a catalog transaction) goes unsaid
REPORT_EVERY_S = 15.0  # then who holds the lock is said again this often
_COMMAND_CHARS = 160

log = logging.getLogger(__name__)


class StoreBusyError(UserError, RuntimeError):
    """Another process held the store's lock for longer than the timeout."""


@dataclass(frozen=True)
class LockHolder:
    """Who holds a lock, as the holder wrote it into the lock file."""

    pid: int | None = None
    host: str | None = None
    command: str | None = None
    since: datetime | None = None

    def describe(self) -> str:
        """"process pid 12 on host h (essaybench curate …)"."""
        text = "process" + (f" pid {self.pid}" if self.pid is not None else "")
        if self.host and self.host != this_host():
            text += f" on host {self.host}"
        return text + (f" ({self.command})" if self.command else "")

    def held_for(self, now: datetime | None = None) -> str:
        """" for 3m05s" since the holder took the lock; "" when it did not say."""
        if self.since is None:
            return ""
        return f" for {format_seconds(((now or datetime.now(UTC)) - self.since).total_seconds())}"


def format_seconds(seconds: float) -> str:
    """Compact: 0.3 s, 45 s, 3m05s, 1h02m."""
    if seconds < 10:
        return f"{max(seconds, 0):.1f} s"
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs} s"


def _this_process() -> str:
    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else ""
    if len(command) > _COMMAND_CHARS:
        command = command[:_COMMAND_CHARS - 1] + "…"
    return json.dumps({"pid": os.getpid(), "host": this_host(),
                       "command": redact(command) or None,
                       "since": datetime.now(UTC).isoformat()}, ensure_ascii=False)


def read_holder(lock_path: Path) -> LockHolder | None:
    """Who holds ``lock_path`` (None when nobody wrote it down). Reads only."""
    try:
        text = lock_path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text:
        return None
    if text.startswith("pid "):  # written by an earlier version
        pid = text.removeprefix("pid ").strip()
        return LockHolder(pid=int(pid) if pid.isdigit() else None)
    try:
        data = json.loads(text)
        since = data.get("since")
        return LockHolder(pid=data.get("pid"), host=data.get("host"),
                          command=data.get("command"),
                          since=datetime.fromisoformat(since) if since else None)
    except (ValueError, TypeError, AttributeError):
        return None


def holder_text(lock_path: Path, held: str = "holds it") -> str:
    """"process pid 12 (essaybench curate) has held it for 3m05s", from the lock file."""
    holder = read_holder(lock_path)
    if holder is None:
        return f"another process {held}"
    return f"{holder.describe()} {held}{holder.held_for()}"


def wait_for_flock(fd: int, mode: int, timeout_s: float, poll_s: float,
                   on_wait: Callable[[float], None] | None = None) -> bool:
    """Take the advisory lock ``mode`` (``fcntl.LOCK_EX`` or ``LOCK_SH``) on ``fd``, polling
    for up to ``timeout_s``; False when it was still held by another process then.
    ``on_wait(seconds waited)`` is called after ``REPORT_AFTER_S`` and then every
    ``REPORT_EVERY_S`` while it waits."""
    started = time.monotonic()
    deadline = started + timeout_s
    report_at = started + REPORT_AFTER_S
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            now = time.monotonic()
            if now >= deadline:
                return False
            if on_wait is not None and now >= report_at:
                on_wait(now - started)
                report_at = now + REPORT_EVERY_S
            time.sleep(min(poll_s, max(deadline - now, 0.0)))


def waiting_reporter(lock_path: Path, what: str, timeout_s: float) -> Callable[[float], None]:
    """Says (on this module's logger) who holds ``lock_path`` and for how long."""

    def report(waited_s: float) -> None:
        log.warning("waiting for %s: %s; waited %s of %s (--lock-timeout)", what,
                    holder_text(lock_path, "has held it"), format_seconds(waited_s),
                    format_seconds(timeout_s))

    return report


@contextmanager
def exclusive_lock(lock_path: Path, timeout_s: float, poll_s: float = 0.05) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        what = f"the lock of store {lock_path.parent} ({lock_path.name})"
        if not wait_for_flock(fd, fcntl.LOCK_EX, timeout_s, poll_s,
                              waiting_reporter(lock_path, what, timeout_s)):
            raise StoreBusyError(
                f"store {lock_path.parent} is busy: "
                f"{holder_text(lock_path, f'has held its lock ({lock_path.name})')}; gave up "
                f"after {format_seconds(timeout_s)}: wait for it to finish or pass a longer "
                "--lock-timeout")
        os.ftruncate(fd, 0)
        os.pwrite(fd, _this_process().encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
