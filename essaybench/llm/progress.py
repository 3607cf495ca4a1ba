"""Progress of gateway batches: calls done/total per (stage, model), ok/failed, tokens.

The gateway tells one :class:`Progress` observer when a call is queued to be sent and
when it finishes; each event is an O(1) update (no logging per call: the gateway is
tuned for 10k-call batches). Which observer is process-wide (``set_progress``): the CLI
puts a live display there in a terminal; the default, a :class:`TextReporter`, logs one
line every few seconds through the ``essaybench.progress`` logger, which a Prefect
worker forwards to the flow run's log when ``PREFECT_LOGGING_EXTRA_LOGGERS=essaybench``.
Calls served from the ledger are not counted: nothing is sent for them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from essaybench.llm.types import ChatRequest, ChatResult

LOGGER_NAME = "essaybench.progress"
DEFAULT_INTERVAL_S = 5.0
logger = logging.getLogger(LOGGER_NAME)
# INFO even though the root logger stays at WARNING: the lines are the point.
logger.setLevel(logging.INFO)

Clock = Callable[[], float]


class Progress(Protocol):
    """What the gateway reports while a batch runs."""

    def planned(self, request: ChatRequest) -> None:
        """``request`` is queued to be sent (a primary call or a follow-up)."""
        ...

    def finished(self, request: ChatRequest, result: ChatResult) -> None:
        """``request``'s call ended with ``result`` (ok or not; before it is recorded)."""
        ...

    def batch_ended(self) -> None:
        """The batch's last call is done (also when it failed)."""
        ...


@dataclass(slots=True)
class Tally:
    total: int = 0
    ok: int = 0
    failed: int = 0
    tokens: int = 0

    @property
    def done(self) -> int:
        return self.ok + self.failed


@dataclass
class ProgressBoard:
    """Counts per (stage, model) since the first call was planned; an observer itself,
    and what displays read (a reader on another thread copies ``tallies`` first)."""

    clock: Clock = time.monotonic
    tallies: dict[tuple[str, str], Tally] = field(default_factory=dict)
    started: float | None = None
    last_note: str | None = None  # e.g. what a run waits for in provider batches

    def note(self, line: str) -> None:
        """A line to show as it is (the gateway's batch mode: each open batch's state)."""
        self.last_note = line

    def planned(self, request: ChatRequest) -> None:
        key = (request.stage, request.model)
        tally = self.tallies.get(key)
        if tally is None:
            tally = self.tallies[key] = Tally()
            if self.started is None:
                self.started = self.clock()
        tally.total += 1

    def finished(self, request: ChatRequest, result: ChatResult) -> None:
        tally = self.tallies.get((request.stage, request.model))
        if tally is None:  # finished without being planned: count it all the same
            self.planned(request)
            tally = self.tallies[(request.stage, request.model)]
        if result.ok:
            tally.ok += 1
        else:
            tally.failed += 1
        tally.tokens += (result.usage.input_tokens or 0) + (result.usage.output_tokens or 0)

    def batch_ended(self) -> None:
        pass

    def elapsed(self) -> float:
        return 0.0 if self.started is None else self.clock() - self.started

    def eta(self) -> float | None:
        """Seconds left at the pace so far; None before the first call is done."""
        tallies = list(self.tallies.values())
        done = sum(t.done for t in tallies)
        total = sum(t.total for t in tallies)
        if done == 0:
            return None
        return self.elapsed() / done * (total - done)

    def line(self) -> str:
        """One line: each (stage, model) with done/total, ok/failed and tokens; then
        elapsed and ETA."""
        parts = [f"{stage or '-'} {model} {t.done}/{t.total} (ok {t.ok}, failed {t.failed}, "
                 f"{t.tokens:,} tokens)"
                 for (stage, model), t in list(self.tallies.items())]
        eta = self.eta()
        return (f"progress: {'; '.join(parts)}; elapsed {duration(self.elapsed())}, "
                f"ETA {'?' if eta is None else duration(eta)}")


def duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class TextReporter(ProgressBoard):
    """A board that emits its line at most every ``interval_s`` (checked when a call
    finishes: one clock read per call) and once when a batch ends."""

    def __init__(self, interval_s: float = DEFAULT_INTERVAL_S,
                 emit: Callable[[str], None] | None = None, clock: Clock = time.monotonic) -> None:
        super().__init__(clock=clock)
        self.interval_s = interval_s
        self.emit = emit or logger.info
        self._next: float | None = None

    def finished(self, request: ChatRequest, result: ChatResult) -> None:
        ProgressBoard.finished(self, request, result)
        now = self.clock()
        if self._next is None:
            self._next = now + self.interval_s
        elif now >= self._next:
            self._next = now + self.interval_s
            self.emit(self.line())

    def note(self, line: str) -> None:
        ProgressBoard.note(self, line)
        self.emit(line)

    def batch_ended(self) -> None:
        tallies = list(self.tallies.values())
        if tallies:
            self.emit(self.line())
        # The next batch (the next stage) starts its own count; unless a concurrent
        # batch (the curation labeler runs several) still has calls under way.
        if all(t.done >= t.total for t in tallies):
            self.tallies = {}
            self.started = None
            self._next = None


_current: Progress | None = None


def current_progress() -> Progress:
    """The process's observer: the one ``set_progress`` installed, else a text reporter."""
    global _current
    if _current is None:
        _current = TextReporter()
    return _current


def set_progress(progress: Progress | None) -> Progress | None:
    """Install ``progress`` for the gateway batches of this process (None: back to the
    default text reporter); returns the one it replaces."""
    global _current
    before, _current = _current, progress
    return before
