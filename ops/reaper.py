"""What a benchmark starts dies with it, even when it is killed with SIGKILL.

A benchmark's finally blocks stop its stack (``ops.local_stack``), servers and network
namespaces; SIGKILL runs none of them, and the stack's processes live in sessions of their
own (PostgreSQL daemonises), so nothing else would stop them. ``Reaper.start`` tags this
process's environment (every process it starts afterwards inherits the tag, whatever
session it moves to) and starts a watcher in a session of its own, which, like the
temporary Prefect server's (``essaybench.cli.temp_server``), polls its parent's pid: when
the parent is gone without saying it finished (``Reaper.done``), it stops the stack
recorded in its manifest, kills every process still carrying the tag and removes the
recorded namespaces. (``PR_SET_PDEATHSIG`` would not do: it fires on the death of the
spawning *thread*, reaches only direct children, and neither PostgreSQL's daemon nor a
namespace goes with it.)

    reaper = Reaper.start()
    reaper.record(stack_dir=folder / "stack", netns=net)
    ...
    reaper.done()  # after the benchmark's own teardown
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from pathlib import Path
from typing import NoReturn
from uuid import uuid4

import psutil  # type: ignore[import-untyped]

from ops import netns as ns

TAG_ENV = "ESSAYBENCH_REAP_TAG"
WATCH_S = 0.5


class Reaper:
    def __init__(self, tag: str, manifest: Path, proc: subprocess.Popen[bytes]) -> None:
        self.tag, self.manifest, self.proc = tag, manifest, proc

    @classmethod
    def start(cls) -> Reaper:
        tag = uuid4().hex
        fd, name = tempfile.mkstemp(prefix="essaybench-reaper-", suffix=".json")
        os.close(fd)
        manifest = Path(name)
        manifest.write_text(json.dumps({}), "utf-8")
        os.environ[TAG_ENV] = tag  # inherited by every process started from here on
        env = {k: v for k, v in os.environ.items() if k != TAG_ENV}
        proc = subprocess.Popen([sys.executable, "-m", "ops.reaper", str(os.getpid()), tag,
                                 str(manifest)], env=env, stdin=subprocess.DEVNULL,
                                cwd=Path(__file__).resolve().parents[1],
                                start_new_session=True)
        return cls(tag, manifest, proc)

    def record(self, stack_dir: Path | None = None, netns: ns.Netns | None = None) -> None:
        data = json.loads(self.manifest.read_text("utf-8"))
        if stack_dir is not None:
            data["stack_dir"] = str(stack_dir.resolve())
        if netns is not None:
            data["netns"] = netns.model_dump(mode="json")
        tmp = self.manifest.with_suffix(".tmp")  # the watcher never reads half a file
        tmp.write_text(json.dumps(data), "utf-8")
        tmp.replace(self.manifest)

    def done(self) -> None:
        """The caller stopped everything itself: the watcher exits without reaping."""
        tmp = self.manifest.with_suffix(".tmp")
        tmp.write_text(json.dumps({"done": True}), "utf-8")
        tmp.replace(self.manifest)
        with suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=4 * WATCH_S + 5)
        self.manifest.unlink(missing_ok=True)
        os.environ.pop(TAG_ENV, None)


def tagged(tag: str, var: str = TAG_ENV) -> list[psutil.Process]:
    """Live processes whose environment sets ``var`` to ``tag`` (a tag is inherited by every
    descendant, whatever session it moved to)."""
    found = []
    for proc in psutil.process_iter():
        with suppress(psutil.Error):
            if proc.environ().get(var) == tag and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


def reap(tag: str, manifest: dict[str, object]) -> None:
    """Stop the recorded stack, kill what still carries ``tag``, remove the namespaces."""
    stack_dir = manifest.get("stack_dir")
    if isinstance(stack_dir, str) and Path(stack_dir).exists():
        from ops import local_stack  # PostgreSQL stopped by its own tool, workers first

        with suppress(Exception):
            local_stack.stop(Path(stack_dir), purge=True, grace=5.0)
    procs = tagged(tag)
    for proc in procs:
        with suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=5.0)
    for proc in alive:
        with suppress(psutil.Error):
            proc.kill()
    net = manifest.get("netns")
    if isinstance(net, dict):
        ns.teardown(ns.Netns.model_validate(net))


def _read(manifest: Path) -> dict[str, object]:
    try:
        data = json.loads(manifest.read_text("utf-8"))
    except (OSError, ValueError):  # being rewritten: read again next time
        return {}
    return data if isinstance(data, dict) else {}


def _watch(parent: int, tag: str, manifest: Path) -> NoReturn:
    # Re-parenting (to init or a subreaper) means the parent died without saying done.
    while os.getppid() == parent:
        if _read(manifest).get("done"):
            sys.exit(0)
        time.sleep(WATCH_S)
    data = _read(manifest)
    if not data.get("done"):
        reap(tag, data)
    manifest.unlink(missing_ok=True)
    sys.exit(0)


if __name__ == "__main__":
    _watch(int(sys.argv[1]), sys.argv[2], Path(sys.argv[3]))
