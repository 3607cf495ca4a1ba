"""Prefect's temporary API server dies with the command that started it.

With no ``PREFECT_API_URL``, Prefect starts a temporary server (uvicorn serving
``prefect.server.api.server``) in a child process the first time a flow needs one, and
stops it at interpreter exit (``atexit``). A command killed by SIGKILL (or an unhandled
SIGTERM) runs no ``atexit``: its server was reparented to init and kept running, holding
its port and the SQLite database of the Prefect home (issue 25, item 3).

:func:`watch_temporary_server` has Prefect start that server through this module,
``python -m essaybench.cli.temp_server PARENT_PID -m uvicorn …`` (Prefect's own uvicorn
command line and environment), which, like the embedded model's server
(``llm/embedded.py``):

- runs in a session (process group) of its own, so a terminal's Ctrl-C reaches only the
  command, whose engine then reports the flow run's end to a server still up (the
  ``atexit`` stop comes after);
- watches its parent's pid from a thread and, when it changes (the parent died without
  stopping it), stops: SIGTERM to itself (uvicorn shuts down in order), then exits
  after a grace period whatever uvicorn is doing.

It applies to the temporary server of this process only: a configured server
(``PREFECT_API_URL``, a worker's flow runs, the test harness's) is left alone. If Prefect
stops starting its server through ``SubprocessASGIServer._run_uvicorn_command`` this does
nothing; tests/cli/test_temp_server.py kills a run with SIGKILL to notice.
"""

from __future__ import annotations

import os
import runpy
import signal
import subprocess
import sys
import threading
import time
from typing import Any, NoReturn

WATCH_INTERVAL_S = 0.5
GRACE_S = 10.0  # after the SIGTERM, before exiting regardless
SERVER_MODULE = "prefect.server.api.server"


def watch_temporary_server() -> None:
    """Make the temporary server Prefect would start for this process (none yet) one
    that dies with it; a no-op when one runs already or an API URL is configured."""
    from prefect.settings import PREFECT_API_URL

    if PREFECT_API_URL.value():
        return
    from prefect.server.api.server import SubprocessASGIServer

    if not hasattr(SubprocessASGIServer, "_run_uvicorn_command"):
        return
    server = SubprocessASGIServer()  # the one instance Prefect's clients start and use
    if server.running or "_run_uvicorn_command" in vars(server):
        return
    server._run_uvicorn_command = lambda: _spawn(server)  # type: ignore[method-assign]


def _spawn(server: Any) -> subprocess.Popen[Any]:
    """Prefect's ``SubprocessASGIServer._run_uvicorn_command`` (prefect 3.9), under this
    module's watch and in a session of its own."""
    import prefect
    from prefect.settings import get_current_settings

    env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
           "PREFECT__SERVER_FINAL": "1",
           **get_current_settings().to_environment_variables(exclude_unset=True)}
    return subprocess.Popen(
        [sys.executable, "-m", __name__, str(os.getpid()),
         "-m", "uvicorn", "--app-dir", str(prefect.__module_path__.parent),
         "--factory", f"{SERVER_MODULE}:create_app", "--host", "127.0.0.1",
         "--port", str(server.port), "--log-level", "error", "--lifespan", "on"],
        env=env, start_new_session=True)


# --- child side: python -m essaybench.cli.temp_server PARENT_PID -m MODULE ARGS... ------


def _watch_parent(parent_pid: int) -> None:
    # Re-parenting (to init or a subreaper) means the parent died without stopping us.
    while os.getppid() == parent_pid:
        time.sleep(WATCH_INTERVAL_S)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(GRACE_S)
    os._exit(3)


def _child_main(argv: list[str]) -> NoReturn:
    parent, flag, module, *args = argv
    if flag != "-m":
        raise SystemExit(f"usage: python -m {__name__} PARENT_PID -m MODULE [ARGS...]")
    threading.Thread(target=_watch_parent, args=(int(parent),), daemon=True).start()
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    sys.exit(0)


if __name__ == "__main__":
    _child_main(sys.argv[1:])
