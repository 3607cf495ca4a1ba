"""A benchmark killed with SIGKILL takes what it started with it (``ops.reaper``): the
watcher finds its parent gone and kills every process carrying the parent's tag, even one
in a session of its own; after ``done`` it leaves everything alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import suppress

import psutil  # type: ignore[import-untyped]

from essaybench.core.paths import PROJECT_ROOT

PARENT = textwrap.dedent("""
    import subprocess, sys, time
    from ops.reaper import Reaper
    reaper = Reaper.start()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             start_new_session=True)  # as the stack's processes are
    print(child.pid, reaper.proc.pid, flush=True)
    if sys.argv[1] == "done":
        reaper.done()
        print("done", flush=True)
    time.sleep(60)
""")


def _parent(mode: str) -> tuple[subprocess.Popen[str], int, int]:
    proc = subprocess.Popen([sys.executable, "-c", PARENT, mode], cwd=PROJECT_ROOT,
                            stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    child, watcher = map(int, proc.stdout.readline().split())
    return proc, child, watcher


def _gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def test_a_sigkilled_parents_processes_are_killed() -> None:
    proc, child, watcher = _parent("kill")
    try:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert _gone(child, 15)
        assert _gone(watcher, 15)
    finally:
        for pid in (child, watcher):
            if not _gone(pid, 0):
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def test_after_done_nothing_is_reaped() -> None:
    proc, child, watcher = _parent("done")
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "done"
        assert _gone(watcher, 15)  # the watcher has left
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert not _gone(child, 1.0)
    finally:
        if not _gone(child, 0):
            with suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
