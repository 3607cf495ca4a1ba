"""Is a stage run still running? Its process (pid on host) and its heartbeat say.

A stage run is ``running`` in the catalog from its start until it finishes ``ok`` or
``failed``; a process killed with ``kill -9`` (or a machine that died) never gets to write
either. So each stage run records its pid and host, and refreshes a heartbeat while it
computes (:class:`Heartbeat`). Listing reports a ``running`` row as ``abandoned`` when:

- it was started on this host and its pid is gone; or
- its heartbeat (its start, for rows from before heartbeats) is older than
  ``STALE_AFTER_S``: another host's process cannot be checked, and on this host a stale
  heartbeat with a live pid means the pid now belongs to some other process.

The catalog row itself is left as it is: listing never writes.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import TracebackType

ABANDONED = "abandoned"
RUNNING = "running"
HEARTBEAT_S = 30.0  # a running stage refreshes its heartbeat this often
STALE_AFTER_S = 600.0  # a heartbeat older than this: nobody is running the stage


def this_host() -> str:
    return socket.gethostname()


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (signal 0 checks, sends nothing)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def listed_status(status: str, *, pid: int | None, host: str | None,
                  heartbeat_at: datetime | None, started_at: datetime,
                  now: datetime | None = None, stale_after_s: float = STALE_AFTER_S) -> str:
    """The status to show for a stage run: ``abandoned`` instead of a ``running`` whose
    process is gone (see the module docstring); any other status as stored."""
    if status != RUNNING:
        return status
    if pid is not None and host == this_host() and not pid_alive(pid):
        return ABANDONED
    last = heartbeat_at or started_at
    if last.tzinfo is None:
        last = last.replace(tzinfo=UTC)
    if (now or datetime.now(UTC)) - last > timedelta(seconds=stale_after_s):
        return ABANDONED
    return status


class Heartbeat:
    """Calls ``beat`` every ``interval_s`` seconds on a background thread while the
    ``with`` block runs. A beat that fails is skipped (the store busy, say): a missed
    heartbeat must never fail the stage it reports on."""

    def __init__(self, beat: Callable[[], None], interval_s: float = HEARTBEAT_S) -> None:
        self.beat = beat
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stage-heartbeat", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.beat()
            except Exception:  # a missed beat is harmless; failing the stage is not
                continue

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
