"""Progress while a command's flow runs (the flow runs in this process, so its gateway
batches report to the observer installed here, see ``essaybench.llm.progress``).

In a terminal: a live table of calls done/total per stage and model, ok/failed, tokens,
elapsed and ETA, and the stage that runs. Log records (Prefect's among them) are printed
above the table, never into it. Piped (CI logs): a line on stdout every
``$ESSAYBENCH_PROGRESS_S`` seconds (10 by default) whatever the calls do, and one when a
stage starts.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from rich.ansi import AnsiDecoder
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from essaybench.cli.common import console
from essaybench.llm.progress import (
    ProgressBoard,
    TextReporter,
    done_of,
    interval_from_env,
    stage_text,
    ticking,
)
from essaybench.llm.progress import set_progress as install

if TYPE_CHECKING:
    from essaybench.llm.registry import ModelSpec


class LiveBoard(ProgressBoard):
    """A board rich renders on its own refresh thread: the gateway only counts."""

    def __init__(self, label: str) -> None:
        super().__init__()
        self.spinner = Spinner("dots", label)

    def __rich__(self) -> RenderableType:
        rows = self.counts()  # the gateway's thread may add a row meanwhile
        now = stage_text()
        extra = [Text(line) for line in (now, self.last_note) if line]
        if not rows:
            return Group(self.spinner, *extra)
        table = Table(expand=False, box=None, pad_edge=False)
        for column in ("stage", "model", "", "done", "ok", "failed", "tokens"):
            table.add_column(column, justify="left" if column in ("stage", "model", "")
                             else "right")
        for stage, model, t, more in rows:
            table.add_row(stage or "-", model,
                          ProgressBar(total=(t.total + more) or 1, completed=t.done, width=24),
                          done_of(t, more), str(t.ok),
                          Text(str(t.failed), style="red" if t.failed else ""),
                          f"{t.tokens:,}")
        return Group(self.spinner, table, Text(self.summary()), *extra)


class _LinesAbove(io.TextIOBase):
    """A stream whose lines ``live``'s console prints above its display, colours kept.
    (rich's own FileProxy does this for sys.stdout, but a Console writing to a FileProxy
    writes past it to the file beneath.)"""

    def __init__(self, live: Console) -> None:
        super().__init__()
        self._live = live
        self._buffer = ""
        self._decoder = AnsiDecoder()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._live.is_terminal

    def write(self, text: str) -> int:
        *lines, self._buffer = (self._buffer + text).split("\n")
        if lines:
            self._live.print(Text("\n").join(self._decoder.decode_line(line)
                                             for line in lines))
        return len(text)

    def flush(self) -> None:
        if self._buffer:
            line, self._buffer = self._buffer, ""
            self._live.print(self._decoder.decode_line(line))


def _stream_handlers() -> list[logging.StreamHandler[io.TextIOBase]]:
    """Every stream handler of every logger (Prefect's console handler is one, shared by
    the root logger, uvicorn and fastapi), once each."""
    loggers = [logging.getLogger(), *(logger for logger in
                                      list(logging.Logger.manager.loggerDict.values())
                                      if isinstance(logger, logging.Logger))]
    found: dict[int, logging.StreamHandler[io.TextIOBase]] = {}
    for logger in loggers:
        for handler in list(logger.handlers):
            if isinstance(handler, logging.StreamHandler) and not isinstance(
                    handler, logging.FileHandler):
                found.setdefault(id(handler), handler)
    return list(found.values())


def _on_screen(stream: object, live: Console) -> bool:
    """Whether a handler's stream is where the display is drawn (the same file, or a
    terminal: stderr beside a terminal's stdout)."""
    if stream is live.file:
        return True
    try:
        return bool(getattr(stream, "isatty", lambda: False)())
    except ValueError:  # a closed stream
        return False


@contextlib.contextmanager
def logs_above(live: Console) -> Iterator[None]:
    """While a live display runs on ``live``, the log handlers that write to the screen
    write through it: each record is printed above the display, and the display drawn
    again below, instead of landing inside it (and leaving old frames behind).
    Prefect's console handler prints with a rich Console of its own onto the stream it was
    set up with: its console is pointed at the display's for the duration; a plain stream
    handler gets the same stream. Both are put back afterwards."""
    from prefect.logging.handlers import PrefectConsoleHandler  # slow: only when shown

    consoles: list[tuple[PrefectConsoleHandler, object]] = []
    streams: list[tuple[logging.StreamHandler[io.TextIOBase], io.TextIOBase]] = []
    for handler in _stream_handlers():
        if not _on_screen(handler.stream, live):
            continue
        if isinstance(handler, PrefectConsoleHandler):
            consoles.append((handler, handler.console.file))
            handler.console.file = _LinesAbove(live)
        else:
            old = handler.setStream(_LinesAbove(live))
            if old is not None:
                streams.append((handler, old))
    try:
        yield
    finally:
        for prefect_handler, file in consoles:
            prefect_handler.console.file = file  # type: ignore[assignment]
        for handler, stream in streams:
            handler.setStream(stream)


def endpoints_note(specs: Iterable[ModelSpec]) -> str:
    """What the calls wait for, by kind of endpoint: the embedded model (minutes), a
    provider's batch API (hours), or the hosts the calls go to."""
    specs = list(specs)
    notes = []
    if any(s.is_embedded for s in specs):
        notes.append("the embedded model is slow: minutes")
    batched = sorted({s.provider for s in specs if not s.is_embedded and s.batch != "none"})
    if batched:
        notes.append(f"{', '.join(batched)} through provider batches: up to 24 h")
    hosts = sorted({urlsplit(s.base_url).netloc for s in specs
                    if not s.is_embedded and s.batch == "none"})
    if hosts:
        shown = ", ".join(hosts[:3]) + (f" and {len(hosts) - 3} more" if len(hosts) > 3 else "")
        notes.append(f"calls to {shown}")
    return "; ".join(notes)


def calls_label(doing: str, config: Path, *, judges: bool = False) -> str:
    """"generating and judging (calls to api.example.com)…": what the command does and,
    from the benchmark config's models (``judges``: its judges only), what its calls
    wait for."""
    from essaybench.bench.config import load_benchmark_config
    from essaybench.llm.registry import load_registry

    try:
        registry = load_registry()
        bench = load_benchmark_config(config)
        names = bench.judges() if judges else bench.models()
        note = endpoints_note(registry.get(name) for name in names)
    except Exception:  # only a label: the run itself reports a broken config or registry
        note = ""
    return f"{doing} ({note})…" if note else f"{doing}…"


def _print_line(line: str) -> None:
    console.print(line, markup=False, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def progress_display(label: str, interval_s: float | None = None) -> Iterator[None]:
    """Show the gateway's progress while the block runs (the block starts the flow).
    ``interval_s``: seconds between two lines when piped (None: ``$ESSAYBENCH_PROGRESS_S``,
    else 10)."""
    if console.is_terminal:
        board = LiveBoard(label)
        before = install(board)
        try:
            with Live(board, console=console, refresh_per_second=4, transient=False), \
                    logs_above(console):
                yield
        finally:
            install(before)
    else:
        every = interval_from_env() if interval_s is None else interval_s
        reporter = TextReporter(every, emit=_print_line)
        before = install(reporter)
        try:
            _print_line(f"{label} (progress every {every:g} s)")
            with ticking(reporter):
                yield
        finally:
            install(before)
