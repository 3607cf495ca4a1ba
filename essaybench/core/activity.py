"""What this process works on now: the stage that runs, for a progress display to name.

Aggregation, statistics and the report make no LLM call, so no call count says what runs
while they do; ``doing(name)`` marks such a stretch (``store.run_stage`` marks every stage,
the report task its page). ``current()`` is the stretch started last that still runs; one
listener (the command line's progress display) is told when a stretch starts. Nothing
here logs or prints: a process without a display pays one list append per stage.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True, eq=False, slots=True)
class Doing:
    """A stretch of work under way: its name and when it started (``time.monotonic``)."""

    name: str
    started: float

    def seconds(self) -> float:
        return time.monotonic() - self.started


Listener = Callable[[Doing], None]

_lock = threading.Lock()
_running: list[Doing] = []  # in the order they started; stages of threads side by side
_listener: Listener | None = None


@contextlib.contextmanager
def doing(name: str) -> Iterator[Doing]:
    """Mark the block as working on ``name`` (a stage's name) while it runs."""
    entry = Doing(name, time.monotonic())
    with _lock:
        _running.append(entry)
        listener = _listener
    if listener is not None:
        with contextlib.suppress(Exception):  # a display never breaks the stage it shows
            listener(entry)
    try:
        yield entry
    finally:
        with _lock:
            for i, other in enumerate(_running):
                if other is entry:
                    del _running[i]
                    break


def current() -> Doing | None:
    """The stretch started last that still runs; None when nothing is marked."""
    with _lock:
        return _running[-1] if _running else None


def set_listener(listener: Listener | None) -> Listener | None:
    """Tell ``listener`` of each stretch that starts from now on (None: nobody); returns
    the one it replaces."""
    global _listener
    with _lock:
        before, _listener = _listener, listener
    return before
