"""The page's essay browser and pairwise view, made in a process of their own while the
page's process draws the charts.

At the paper's scale (10,920 essays) the drill-down rows, the browser's index and chunks
and the pairwise view take ~0.7 s of one core and the judge sections' charts ~1.2 s of
another; both are pure Python, so threads would take turns on one core. ``EssaysJob``
sends the tables (pickled, over a pipe) to ``python -m essaybench.report.essays_job``,
a fresh interpreter that imports only what the browser needs (~0.3 s, no matplotlib), and
``result()`` reads back what ``make_essays`` returns there: the same objects, byte for byte,
as making them here (tested). A report of fewer essays than ``PROCESS_FROM_ESSAYS`` makes
them in its own process: starting another costs more than it saves.

The child is this package's own code (its folder first on ``PYTHONPATH``) and reads
nothing but its stdin; it dies with its pipe if the page's process dies.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import polars as pl

from essaybench.report.browser import Browser, browser_data
from essaybench.report.drilldown import drilldown
from essaybench.report.labels import Labels
from essaybench.report.pairs import PairsView, pairs_data

PROCESS_FROM_ESSAYS = 3000
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding essaybench/


@dataclass(frozen=True)
class EssaysInput:
    essays: pl.DataFrame
    judgments: pl.DataFrame
    pairwise: pl.DataFrame | None
    labels: Labels
    checked: pl.DataFrame  # compliance_table(essays, prompt_column="prompt_text")
    judges: list[str]
    chunk_bytes: int


@dataclass(frozen=True)
class Essays:
    browser: Browser
    pairs: PairsView | None


def make_essays(job: EssaysInput) -> Essays:
    """The browser's index and chunks, and the pairwise view's, for ``job``."""
    prompts = drilldown(job.essays, job.judgments, job.labels, job.checked)
    browser = browser_data(prompts, job.judges, chunk_bytes=job.chunk_bytes)
    pairs = None
    if job.pairwise is not None and job.pairwise.height:
        pairs = pairs_data(job.pairwise, [r[0] for r in browser.index["essays"]],
                           chunk_bytes=job.chunk_bytes)
    return Essays(browser, pairs)


class EssaysJob:
    """``make_essays`` of the job ``send`` gives, in another process when ``process``:
    started here, before the page's process reads the run, so that the child's imports
    overlap the reading. Use as a context manager: a child never sent a job (the run
    could not be read) is stopped on exit."""

    def __init__(self, *, process: bool) -> None:
        self._job: EssaysInput | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._sent: threading.Thread | None = None
        if process:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                [str(_PACKAGE_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "essaybench.report.essays_job"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)

    def __enter__(self) -> EssaysJob:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.communicate()

    def send(self, job: EssaysInput) -> None:
        self._job = job
        if self._proc is None:
            return
        stdin = self._proc.stdin
        assert stdin is not None
        # written from a thread: the pipe takes the tables only as fast as the child,
        # maybe still importing, reads them, and this process has charts to draw meanwhile
        self._sent = threading.Thread(target=_send, args=(stdin, job), daemon=True)
        self._sent.start()

    def result(self) -> Essays:
        if self._job is None:
            raise RuntimeError("the essay browser was never sent its job")
        if self._proc is None:
            return make_essays(self._job)
        if self._sent is not None:  # the child reads all of its input before it answers
            self._sent.join()
        self._proc.stdin = None  # closed by the sender
        out, err = self._proc.communicate()
        if self._proc.returncode != 0:
            tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
            raise RuntimeError(f"the essay browser's process exited with "
                               f"{self._proc.returncode}: {tail[0]}")
        made = pickle.loads(out)
        if not isinstance(made, Essays):
            raise RuntimeError("the essay browser's process answered something else")
        return made


def _send(stdin: IO[bytes], job: EssaysInput) -> None:
    # a broken pipe is a child that died: result() reports its exit
    with contextlib.suppress(BrokenPipeError):
        pickle.dump(job, stdin, protocol=pickle.HIGHEST_PROTOCOL)
    with contextlib.suppress(BrokenPipeError):
        stdin.close()


def main() -> None:
    """The child: a pickled ``EssaysInput`` on stdin, the pickled ``Essays`` on stdout
    (only ever from the parent above, over its private pipe)."""
    job = pickle.load(sys.stdin.buffer)
    if not isinstance(job, EssaysInput):
        raise SystemExit("essays_job: stdin is not an EssaysInput")
    pickle.dump(make_essays(job), sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    # run as essaybench.report.essays_job, not __main__: the classes the pickles name
    from essaybench.report.essays_job import main as canonical_main

    canonical_main()
