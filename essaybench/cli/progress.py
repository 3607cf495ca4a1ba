"""Progress while a command's flow runs (the flow runs in this process, so its gateway
batches report to the observer installed here, see ``essaybench.llm.progress``).

In a terminal: a live table of calls done/total per stage and model, ok/failed, tokens,
elapsed and ETA. Piped (CI logs): one line every few seconds on stdout.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from rich.console import Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.spinner import Spinner
from rich.table import Table

from essaybench.cli.common import console
from essaybench.llm.progress import DEFAULT_INTERVAL_S, ProgressBoard, TextReporter, duration
from essaybench.llm.progress import set_progress as install


class LiveBoard(ProgressBoard):
    """A board rich renders on its own refresh thread: the gateway only counts."""

    def __init__(self, label: str) -> None:
        super().__init__()
        self.spinner = Spinner("dots", label)

    def __rich__(self) -> RenderableType:
        tallies = list(self.tallies.items())  # the gateway's thread may add a row meanwhile
        note = [self.last_note] if self.last_note else []  # batch mode: what the run waits for
        if not tallies:
            return Group(self.spinner, *note)
        table = Table(expand=False, box=None, pad_edge=False)
        for column in ("stage", "model", "", "done", "ok", "failed", "tokens"):
            table.add_column(column, justify="left" if column in ("stage", "model", "")
                             else "right")
        for (stage, model), t in tallies:
            table.add_row(stage or "-", model, ProgressBar(total=t.total or 1, completed=t.done,
                                                           width=24),
                          f"{t.done}/{t.total}", str(t.ok),
                          f"[red]{t.failed}[/]" if t.failed else "0", f"{t.tokens:,}")
        eta = self.eta()
        return Group(self.spinner, table,
                     f"elapsed {duration(self.elapsed())}, "
                     f"ETA {'?' if eta is None else duration(eta)}", *note)


def _print_line(line: str) -> None:
    console.print(line, markup=False, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def progress_display(label: str, interval_s: float = DEFAULT_INTERVAL_S) -> Iterator[None]:
    """Show the gateway's progress while the block runs (the block starts the flow)."""
    if console.is_terminal:
        board = LiveBoard(label)
        before = install(board)
        try:
            with Live(board, console=console, refresh_per_second=4, transient=False):
                yield
        finally:
            install(before)
    else:
        before = install(TextReporter(interval_s, emit=_print_line))
        try:
            _print_line(f"{label} (progress every {interval_s:g} s)")
            yield
        finally:
            install(before)
