"""Progress of gateway batches: calls done/total per (stage, model), ok/failed, tokens.

The gateway tells one :class:`Progress` observer when a call is queued to be sent, when
it finishes, and which follow-ups a finished call asked for (the judge calls of a fresh
essay); each event is an O(1) update (no logging per call: the gateway is tuned for
10k-call batches). The follow-ups the calls still to come will ask for count in the
total and the ETA before they exist: as many per call as the calls so far asked for.
Which observer is process-wide (``set_progress``): the CLI puts a live display there in a
terminal, and a text reporter on a clock (``ticking``) when piped; the default, a
:class:`TextReporter`, logs a line every ``DEFAULT_INTERVAL_S`` while calls are under way
through the ``essaybench.progress`` logger, which a Prefect worker forwards to the flow
run's log when ``PREFECT_LOGGING_EXTRA_LOGGERS=essaybench``. Calls served from the ledger
are not counted: nothing is sent for them. Each line names the stage that runs
(``core.activity``), which is all there is to say while a stage makes no calls.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from essaybench.core import activity
from essaybench.core.errors import UserError
from essaybench.llm.types import ChatRequest, ChatResult

LOGGER_NAME = "essaybench.progress"
DEFAULT_INTERVAL_S = 10.0
INTERVAL_ENV = "ESSAYBENCH_PROGRESS_S"  # seconds between two progress lines when piped
logger = logging.getLogger(LOGGER_NAME)
# INFO even though the root logger stays at WARNING: the lines are the point.
logger.setLevel(logging.INFO)

Clock = Callable[[], float]


class Progress(Protocol):
    """What the gateway reports while a batch runs."""

    def batch_started(self) -> None:
        """A batch begins (each is ended by one ``batch_ended``, failed or not)."""
        ...

    def planned(self, request: ChatRequest) -> None:
        """``request`` is queued to be sent (a primary call or a follow-up)."""
        ...

    def finished(self, request: ChatRequest, result: ChatResult) -> None:
        """``request``'s call ended with ``result`` (ok or not; before it is recorded)."""
        ...

    def followed(self, request: ChatRequest, asked: Sequence[ChatRequest]) -> None:
        """``request``, sent in a batch with follow-ups, asked for ``asked`` (those not
        asked for before; possibly none, e.g. a failed essay): told once per sent call."""
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
    # Calls whose follow-ups are known, per (stage, model) of the asking call; and per
    # (stage, model) of the follow-ups: how many were asked for, by how many calls.
    asked_by: Counter[tuple[str, str]] = field(default_factory=Counter)
    asked: Counter[tuple[str, str]] = field(default_factory=Counter)
    askers: Counter[tuple[str, str]] = field(default_factory=Counter)
    open_batches: int = 0  # batches started and not ended (several threads may run one)
    _batches_lock: threading.Lock = field(default_factory=threading.Lock, init=False,
                                          repr=False)
    opened: float = field(init=False)  # when the board was made: the idle line's clock

    def __post_init__(self) -> None:
        self.opened = self.clock()

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

    def followed(self, request: ChatRequest, asked: Sequence[ChatRequest]) -> None:
        self.asked_by[(request.stage, request.model)] += 1
        for key, n in Counter((r.stage, r.model) for r in asked).items():
            self.asked[key] += n
            self.askers[key] += 1

    def batch_started(self) -> None:
        with self._batches_lock:
            self.open_batches += 1

    def batch_ended(self) -> None:
        with self._batches_lock:
            self.open_batches = max(0, self.open_batches - 1)

    def expected(self) -> dict[tuple[str, str], int]:
        """Follow-ups not asked for yet, per (stage, model): the calls still to come that
        ask for follow-ups, times as many as a call asked for so far (failed essays, which
        ask for none, count). Follow-ups only one call asked for while several were
        followed are one-off (the drift anchors, sent with the first essay's judge calls
        under their own stage): none is expected of the calls to come."""
        asking = sum(self.asked_by.values())
        to_come = sum(max(0, self.tallies[key].total - n) for key, n in
                      list(self.asked_by.items()) if key in self.tallies)
        if asking == 0 or to_come == 0:
            return {}
        expected = {key: round(n / asking * to_come) for key, n in list(self.asked.items())
                    if asking == 1 or self.askers[key] > 1}
        return {key: n for key, n in expected.items() if n > 0}

    def elapsed(self) -> float:
        return 0.0 if self.started is None else self.clock() - self.started

    def remaining(self) -> int:
        """Calls not done yet: planned, and the follow-ups expected."""
        return (sum(t.total - t.done for t in list(self.tallies.values()))
                + sum(self.expected().values()))

    def eta(self) -> float | None:
        """Seconds left at the pace so far; None before the first call is done."""
        done = sum(t.done for t in list(self.tallies.values()))
        if done == 0:
            return None
        return self.elapsed() / done * self.remaining()

    def counts(self) -> list[tuple[str, str, Tally, int]]:
        """(stage, model, tally, follow-ups expected) per row of the display."""
        expected = self.expected()
        return [(stage, model, t, expected.get((stage, model), 0))
                for (stage, model), t in list(self.tallies.items())]

    def summary(self) -> str:
        """Elapsed and ETA; "calls done" instead of "ETA 0s" while a stage still runs."""
        eta = self.eta()
        if eta is not None and self.remaining() == 0 and activity.current() is not None:
            return f"elapsed {duration(self.elapsed())}, calls done"
        left = "?" if eta is None else "<1s" if 0 < eta < 0.5 else duration(eta)
        return f"elapsed {duration(self.elapsed())}, ETA {left}"

    def line(self) -> str:
        """One line: the stage that runs; each (stage, model) with done/total (``~``: with
        the follow-ups expected), ok/failed and tokens; then elapsed and ETA."""
        parts = [f"{stage or '-'} {model} {done_of(t, more)} (ok {t.ok}, failed {t.failed}, "
                 f"{t.tokens:,} tokens)" for stage, model, t, more in self.counts()]
        now = stage_text()
        if not parts:
            return (f"progress: {now}" if now else
                    f"progress: no stage running, {duration(self.clock() - self.opened)} "
                    "since the start")
        head = f"{now}; " if now else ""
        return f"progress: {head}{'; '.join(parts)}; {self.summary()}"


def done_of(tally: Tally, expected: int) -> str:
    """``done/total``; ``done/~total`` when the total counts follow-ups not asked yet."""
    return (f"{tally.done}/~{tally.total + expected}" if expected
            else f"{tally.done}/{tally.total}")


def stage_text() -> str | None:
    """"stage NAME running 1m05s" for what runs now (``core.activity``); None: nothing."""
    now = activity.current()
    return None if now is None else f"stage {now.name} running {duration(now.seconds())}"


def duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def interval_from_env(default: float = DEFAULT_INTERVAL_S) -> float:
    """Seconds between two progress lines: ``$ESSAYBENCH_PROGRESS_S``, else ``default``."""
    raw = os.environ.get(INTERVAL_ENV, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise UserError(f"{INTERVAL_ENV}={raw!r}: give the seconds between two progress "
                        "lines, a number above 0")
    return value


class TextReporter(ProgressBoard):
    """A board that emits its line at most every ``interval_s`` (checked when a call
    finishes: one clock read per call), once when a batch ends, and, while ``ticking``
    (or, with ``tick_while_busy``, while calls are under way), whenever the interval
    passes without a line (a slow call, a stage without calls)."""

    def __init__(self, interval_s: float = DEFAULT_INTERVAL_S,
                 emit: Callable[[str], None] | None = None, clock: Clock = time.monotonic,
                 tick_while_busy: bool = False) -> None:
        super().__init__(clock=clock)
        self.interval_s = interval_s
        self.emit = emit or logger.info
        self.tick_while_busy = tick_while_busy
        self._next: float | None = None
        self._lock = threading.Lock()  # the ticker's thread and the gateway's both emit
        self._busy: _Ticker | None = None  # with tick_while_busy: from a batch's first call

    def planned(self, request: ChatRequest) -> None:
        ProgressBoard.planned(self, request)
        if self.tick_while_busy and self._busy is None:
            with self._lock:
                if self._busy is None:
                    self._busy = _Ticker(self)

    def _emit(self, line: str) -> None:
        with self._lock:
            self._next = self.clock() + self.interval_s
        self.emit(line)

    def finished(self, request: ChatRequest, result: ChatResult) -> None:
        ProgressBoard.finished(self, request, result)
        now = self.clock()
        if self._next is None:
            self._next = now + self.interval_s
        elif now >= self._next:
            self._emit(self.line())

    def tick(self) -> float:
        """Emit the line if the interval passed since the last one (or since the first
        tick); returns the seconds until the next is due."""
        now = self.clock()
        with self._lock:
            if self._next is None:
                self._next = now + self.interval_s
            due = now >= self._next
        if due:
            self._emit(self.line())
        return max(0.0, (self._next or now) - self.clock())

    def stage_started(self, doing: activity.Doing) -> None:
        """A line when a stage starts (``core.activity`` listener): it says what runs."""
        self._emit(f"progress: stage {doing.name} started")

    def note(self, line: str) -> None:
        ProgressBoard.note(self, line)
        self._emit(line)

    def batch_ended(self) -> None:
        ProgressBoard.batch_ended(self)
        if self.tallies:
            self._emit(self.line())
        # The next batch (the next stage) starts its own count, and a failed batch's calls
        # that never ended are not counted on; unless a concurrent batch (the curation
        # labeler runs several) is still under way.
        if self.open_batches == 0:
            self.tallies = {}
            self.started = None
            self.asked_by, self.asked, self.askers = Counter(), Counter(), Counter()
            with self._lock:
                busy, self._busy = self._busy, None
            if busy is not None:
                busy.stop()


class _Ticker:
    """A thread that has ``reporter`` emit its line whenever it is due, until stopped."""

    def __init__(self, reporter: TextReporter) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(reporter,),
                                        name="essaybench-progress", daemon=True)
        self._thread.start()

    def _run(self, reporter: TextReporter) -> None:
        wait = reporter.tick()
        while not self._stop.wait(max(wait, 0.01)):
            wait = reporter.tick()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)


@contextlib.contextmanager
def ticking(reporter: TextReporter) -> Iterator[None]:
    """While the block runs, ``reporter`` emits a line at least every ``interval_s``
    whatever the calls do, and one when a stage starts (on a thread of its own)."""
    before = activity.set_listener(reporter.stage_started)
    ticker = _Ticker(reporter)
    try:
        yield
    finally:
        ticker.stop()
        activity.set_listener(before)


_current: Progress | None = None


def current_progress() -> Progress:
    """The process's observer: the one ``set_progress`` installed, else a text reporter."""
    global _current
    if _current is None:  # a worker's flow run log: a line every interval while calls run
        _current = TextReporter(tick_while_busy=True)
    return _current


def set_progress(progress: Progress | None) -> Progress | None:
    """Install ``progress`` for the gateway batches of this process (None: back to the
    default text reporter); returns the one it replaces."""
    global _current
    before, _current = _current, progress
    return before
