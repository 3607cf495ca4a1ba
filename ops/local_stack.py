"""Start and stop, on one host, what several workers need: a private PostgreSQL, a Prefect
server on it, the process work pool of ``prefect.yaml`` with a concurrency limit, and N
workers; everything on 127.0.0.1, its state (pids, URLs, logs) under one directory.

    python -m ops.local_stack start --dir out/stack --workers 2 --pool-limit 4
    eval "$(python -m ops.local_stack env --dir out/stack)"   # PREFECT_API_URL for the CLI
    prefect --no-prompt deploy --all
    python -m ops.local_stack stop --dir out/stack [--purge]

Workers inherit the environment ``start`` runs in (ESSAYBENCH_STORE, ESSAYBENCH_MODELS,
provider keys…). Each long-running process starts in a session of its own, and all carry
a tag of this stack in their environment: the flow-run processes a worker spawns (in
sessions of their own) are found by it, so ``stop`` stops exactly this stack's processes.

With ``--netns`` (``start(..., netns=True)``, root only: ``ops.netns``) each worker runs in a
network namespace of its own, joined to the host by a bridge: the server listens on the
bridge's address (``StackState.host_address``, 10.213.X.1) instead of 127.0.0.1, and the
workers and their flow runs reach the host only there. Any other service the flows call (the
fake model server, an S3 server) must then listen on ``host_address`` too: 127.0.0.1 inside a
namespace is the namespace's own. ``stop`` removes the namespaces, links and bridge recorded
in the state file, also after a crashed start.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from uuid import uuid4

import httpx
import psutil  # type: ignore[import-untyped]
import yaml
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.settings import PREFECT_API_URL, temporary_settings
from prefect.workers.process import ProcessWorker
from pydantic import BaseModel, ConfigDict

from essaybench.core.paths import PROJECT_ROOT
from ops import netns as ns
from ops import postgres, reaper
from ops.netns import Netns
from ops.postgres import PgCluster

PREFECT = str(Path(sys.executable).with_name("prefect"))  # the CLI of this virtualenv
STATE_FILE = "stack.json"
TAG_ENV = "ESSAYBENCH_STACK_TAG"
STORE_QUEUE, SHARD_QUEUE = "default", "shards"  # the pool's queues (prefect.yaml)
LOOPBACK = "127.0.0.1"
_QUIET = {"DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


class StackState(BaseModel):
    """``<dir>/stack.json`` (mode 600: the database URL holds the password)."""

    model_config = ConfigDict(extra="forbid")

    tag: str
    pool: str
    api_url: str | None = None
    postgres: PgCluster | None = None
    processes: dict[str, int] = {}  # name -> pid, each the leader of its own session
    netns: Netns | None = None  # worker-k runs in namespace k of it

    @property
    def db_url(self) -> str | None:
        return self.postgres.url() if self.postgres else None

    @property
    def host_address(self) -> str:
        """The address the server listens on, and where any other service the flows call
        must listen: the bridge's with namespaces, else 127.0.0.1."""
        return self.netns.host_address if self.netns else LOOPBACK


def default_pool() -> str:
    """The work pool ``prefect.yaml``'s deployments run on (all use one)."""
    spec = yaml.safe_load((PROJECT_ROOT / "prefect.yaml").read_text(encoding="utf-8"))
    pools = {d["work_pool"]["name"] for d in spec["deployments"]}
    if len(pools) != 1:
        raise ValueError(f"prefect.yaml: expected one work pool, found {sorted(pools)}")
    return str(pools.pop())


def read_state(state_dir: Path) -> StackState | None:
    path = state_dir / STATE_FILE
    if not path.exists():
        return None
    return StackState.model_validate_json(path.read_text(encoding="utf-8"))


def _write_state(state_dir: Path, state: StackState) -> None:
    path = state_dir / STATE_FILE
    tmp = path.with_suffix(".tmp")
    # Without namespaces the file is what it was before they existed.
    tmp.write_text(state.model_dump_json(indent=2, exclude={"netns"} if state.netns is None
                                         else None), encoding="utf-8")
    tmp.chmod(0o600)
    tmp.replace(path)


def free_port(host: str = LOOPBACK) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
    return port


def _wait(ready: Callable[[], bool], timeout: float, what: str,
          dead: Callable[[], str | None] = lambda: None) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if (reason := dead()) is not None:
            raise RuntimeError(f"{what}: {reason}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:g} s")
        time.sleep(0.5)


def _alive(pid: int) -> bool:
    with suppress(psutil.Error):
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    return False


def gone(state: StackState) -> str | None:
    """Which recorded process of the stack no longer runs, if one does not."""
    dead = [f"{name} (pid {pid})" for name, pid in state.processes.items() if not _alive(pid)]
    return f"not running: {', '.join(dead)}" if dead else None


def tagged(tag: str) -> list[psutil.Process]:
    """Live processes carrying the stack's tag (its own and every descendant, whatever
    session they moved to); PostgreSQL's included."""
    return reaper.tagged(tag, TAG_ENV)


class _Starter:
    """One ``start``: spawns detached processes and records each at once, so that a start
    failing half-way is stopped by the same ``stop``."""

    def __init__(self, state_dir: Path, state: StackState, env: Mapping[str, str]) -> None:
        self.dir, self.state = state_dir, state
        self.env = {**env, **_QUIET, TAG_ENV: state.tag,
                    "PREFECT_HOME": str(state_dir / "prefect-home")}
        self.logs = state_dir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)

    def spawn(self, name: str, args: Sequence[str], extra: Mapping[str, str],
              prefix: Sequence[str] = ()) -> int:
        with (self.logs / f"{name}.log").open("ab") as log:
            popen = subprocess.Popen([*prefix, *args], stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env={**self.env, **extra},
                                     cwd=PROJECT_ROOT, start_new_session=True)
        self.state.processes[name] = popen.pid
        _write_state(self.dir, self.state)
        return popen.pid

    def exited(self, name: str) -> str | None:
        pid = self.state.processes[name]
        if _alive(pid):
            return None
        log = (self.logs / f"{name}.log").read_text(errors="replace")[-3000:]
        return f"{name} exited; its log ({self.logs / name}.log) ends:\n{log}"


def create_pool(api: str, pool: str, limit: int) -> None:
    """The process work pool (replaced if it exists), its default job template, at most
    ``limit`` flow runs at once over all its workers."""
    with temporary_settings(updates={PREFECT_API_URL: api}), \
            get_client(sync_client=True) as client:
        client.create_work_pool(WorkPoolCreate(
            name=pool, type=ProcessWorker.type, concurrency_limit=limit,
            base_job_template=ProcessWorker.get_default_base_job_template()), overwrite=True)


def online_workers(api: str, pool: str) -> int:
    try:
        reply = httpx.post(f"{api}/work_pools/{pool}/workers/filter", json={}, timeout=5,
                           trust_env=False)
    except httpx.HTTPError:
        return 0
    return sum(w.get("status") == "ONLINE" for w in reply.json()) if reply.is_success else 0


def start(state_dir: Path, workers: int, pool_limit: int, pool: str | None = None,
          port: int | None = None, ui: bool = True, timeout: float = 180.0,
          env: Mapping[str, str] | None = None, netns: bool | Netns = False,
          store_worker: bool = False, worker_limit: int | None = None,
          worker_env: Mapping[int, Mapping[str, str]] | None = None) -> StackState:
    """Start the stack (reusing the database a stopped stack left in ``state_dir``); its
    state once the server answers and every worker is online. ``store_worker``: the
    runbook's split (docs/scale-out.md, "Runbook: two or three hosts"): worker-1 serves the
    pool's ``default`` and ``shards`` queues (the store host), the others only ``shards``;
    else every worker serves every queue. ``worker_limit``: each worker runs at most that
    many flow runs at once (``prefect worker start --limit``). ``worker_env``: variables
    of worker ``k`` alone (1-based; what differs between hosts, such as
    ``ESSAYBENCH_ENDPOINTS``), over ``env``. ``netns``: each worker in a
    network namespace of its own, the server on ``StackState.host_address`` (module doc);
    ``ops.netns.NetnsError`` (one line) when namespaces cannot be made here. A caller whose
    services (and so ``env``) need the bridge address before the workers start makes the
    namespaces itself (``ops.netns.create(workers)``) and passes them: the stack then owns
    them (``stop`` removes them; the caller's own ``ops.netns.teardown`` is harmless)."""
    if isinstance(netns, Netns) and netns.count < workers:
        raise ValueError(f"{workers} workers need {workers} namespaces, not {netns.count}")
    state_dir = state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    old = read_state(state_dir)
    if old is not None and (tagged(old.tag) or any(map(_alive, old.processes.values()))):
        raise RuntimeError(f"a stack already runs from {state_dir}: stop it first")
    if old is not None and old.netns is not None and (remains := ns.teardown(old.netns)):
        raise ns.NetnsError(f"a crashed stack's namespaces or links remain: {remains}")
    state = StackState(tag=uuid4().hex, pool=pool or default_pool(),
                       postgres=old.postgres if old else None)
    base = {k: v for k, v in (os.environ if env is None else env).items()
            if k not in ("PREFECT_API_URL", TAG_ENV)}
    starter = _Starter(state_dir, state, base)
    deadline = time.monotonic() + timeout

    def left() -> float:
        return max(1.0, deadline - time.monotonic())

    try:
        if isinstance(netns, Netns) or netns:  # first: fast, recorded before what may fail
            state.netns = netns if isinstance(netns, Netns) else ns.create(workers)
            _write_state(state_dir, state)
        if state.postgres is None:
            state.postgres = postgres.init_cluster(state_dir, free_port(), left())
            _write_state(state_dir, state)
        postgres.start(state.postgres, starter.env, left())
        postgres.create_database(state.postgres, left())

        server_host = state.host_address
        server_port = port or free_port(server_host)
        api = state.api_url = f"http://{server_host}:{server_port}/api"
        starter.spawn("server", [PREFECT, "server", "start", "--host", server_host, "--port",
                                 str(server_port)],
                      {"PREFECT_SERVER_DATABASE_CONNECTION_URL": state.postgres.url(),
                       "PREFECT_UI_ENABLED": str(ui).lower(),
                       "PREFECT_SERVER_UI_ENABLED": str(ui).lower()})

        def healthy() -> bool:
            try:
                return httpx.get(f"{api}/health", timeout=2, trust_env=False).is_success
            except httpx.HTTPError:
                return False

        _wait(healthy, left(), "prefect server health", lambda: starter.exited("server"))
        client_env = {"PREFECT_API_URL": api}
        if state.netns is not None:  # a proxy from the environment is no way to the bridge
            client_env |= {var: ",".join(filter(None, (starter.env.get(var), server_host)))
                           for var in ("NO_PROXY", "no_proxy")}
        # In this process, not with `prefect work-pool create`: a CLI start costs ~5-10 s
        # of CPU on a busy host, about what the workers starting meanwhile need.
        create_pool(api, state.pool, pool_limit)
        host = socket.gethostname()
        for k in range(1, workers + 1):
            starter.spawn(f"worker-{k}", [PREFECT, "worker", "start", "--pool", state.pool,
                                          "--name", f"{host}-{k}",
                                          *worker_queues(k, store_worker),
                                          *(["--limit", str(worker_limit)]
                                            if worker_limit else [])],
                          {**(worker_env or {}).get(k, {}), **client_env},
                          state.netns.exec_prefix(k) if state.netns else ())
        _wait(lambda: online_workers(api, state.pool) >= workers, left(),
              f"{workers} workers online in pool {state.pool}",
              lambda: next(filter(None, (starter.exited(f"worker-{k}")
                                         for k in range(1, workers + 1))), None))
    except BaseException:
        stop(state_dir)
        raise
    _write_state(state_dir, state)
    return state


def _signal(procs: Sequence[psutil.Process], pids: Sequence[int], sig: signal.Signals) -> None:
    for pid in pids:  # each recorded pid leads its own process group
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
    for proc in procs:
        with suppress(psutil.Error):
            proc.send_signal(sig)


def stop(state_dir: Path, purge: bool = False, grace: float = 15.0) -> list[int]:
    """Stop workers and their flow runs, then the server, then PostgreSQL; SIGKILL what
    outlives ``grace`` seconds. Returns the pids of this stack still alive (none, normally).
    ``purge`` also deletes the database."""
    state_dir = state_dir.resolve()
    found = read_state(state_dir)
    if found is None:
        return []
    state = found
    pg_pids = set()
    if state.postgres and (pid := postgres.postmaster_pid(state.postgres)) is not None:
        with suppress(psutil.Error):
            pg_pids = {pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))}
    # Workers first (no new flow runs), then everything else tagged but PostgreSQL (flow
    # runs, the server and its uvicorn), which is stopped last by its own tool.
    workers = [pid for name, pid in state.processes.items() if name != "server"]
    for group in (workers, [pid for name, pid in state.processes.items() if name == "server"]):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            procs = [p for p in tagged(state.tag) if p.pid not in pg_pids]
            if group is workers:  # the server stays up while workers report their runs
                server = state.processes.get("server")
                procs = [p for p in procs if p.pid != server and server not in
                         {a.pid for a in _ancestors(p)}]
            _signal(procs, [p for p in group if _alive(p)], sig)
            psutil.wait_procs(procs, timeout=grace if sig == signal.SIGTERM else 5.0)
    if state.postgres is not None:
        postgres.stop(state.postgres)
    left = tagged(state.tag)
    _signal(left, [], signal.SIGKILL)
    psutil.wait_procs(left, timeout=5.0)
    for pid in state.processes.values():  # reap our own children when start() ran here
        with suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
    if purge and state.postgres is not None:
        postgres.purge(state.postgres)
        state.postgres = None
    # After the processes: a namespace goes away only when nothing runs in it any more.
    links = ns.teardown(state.netns) if state.netns is not None else []
    state.processes, state.api_url = {}, None
    state.netns = state.netns if links else None  # a later stop tries again
    _write_state(state_dir, state)
    if links:
        raise ns.NetnsError(f"namespaces or links not removed: {links}")
    return [p.pid for p in tagged(state.tag)]


def _ancestors(proc: psutil.Process) -> list[psutil.Process]:
    with suppress(psutil.Error):
        return list(proc.parents())
    return []


def worker_queues(k: int, store_worker: bool) -> list[str]:
    """The ``--work-queue`` options of worker ``k`` (1-based): none (every queue of the
    pool) unless ``store_worker``; then the runbook's split (``start``)."""
    if not store_worker:
        return []
    queues = [STORE_QUEUE, SHARD_QUEUE] if k == 1 else [SHARD_QUEUE]
    return [arg for queue in queues for arg in ("--work-queue", queue)]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ops.local_stack", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, what in (("start", "start PostgreSQL, the Prefect server, the pool, workers"),
                       ("stop", "stop everything start started"),
                       ("status", "what runs, its URLs"),
                       ("env", "export lines for a shell: PREFECT_API_URL and the DB URL")):
        cmd = sub.add_parser(name, help=what)
        cmd.add_argument("--dir", type=Path, required=True, help="the stack's state directory")
        if name == "start":
            cmd.add_argument("--workers", type=int, default=2)
            cmd.add_argument("--pool-limit", type=int, default=4,
                             help="at most this many flow runs of the pool at once")
            cmd.add_argument("--pool", default=None, help="default: prefect.yaml's pool")
            cmd.add_argument("--port", type=int, default=None, help="server port (free one)")
            cmd.add_argument("--no-ui", action="store_true", help="no web UI (faster start)")
            cmd.add_argument("--timeout", type=float, default=180.0)
            cmd.add_argument("--netns", action="store_true",
                             help="each worker in a network namespace of its own (root)")
            cmd.add_argument("--store-worker", action="store_true",
                             help="worker-1 alone serves the default queue (the store "
                             "host), every worker the shards queue (the runbook's split)")
        if name == "stop":
            cmd.add_argument("--purge", action="store_true", help="also delete the database")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(_parser().parse_args(argv))
    except (RuntimeError, OSError, LookupError, ValueError, subprocess.TimeoutExpired) as failed:
        print(f"ops.local_stack: {failed}", file=sys.stderr)  # one line or a log's tail
        return 1


def _main(args: argparse.Namespace) -> int:
    if args.command == "start":
        if args.workers < 1 or args.pool_limit < 1:
            raise SystemExit("--workers and --pool-limit must be at least 1")
        state = start(args.dir, args.workers, args.pool_limit, args.pool, args.port,
                      not args.no_ui, args.timeout, netns=args.netns,
                      store_worker=args.store_worker)
        print(f"PREFECT_API_URL={state.api_url}\npool {state.pool} (limit {args.pool_limit}), "
              f"{args.workers} workers; logs in {args.dir.resolve() / 'logs'}")
        return 0
    if args.command == "stop":
        alive = stop(args.dir, args.purge)
        print(f"still alive: {alive}" if alive else "stopped")
        return 1 if alive else 0
    current = read_state(args.dir.resolve())
    if current is None or current.api_url is None:
        print(f"no stack runs from {args.dir}", file=sys.stderr)
        return 1
    if args.command == "env":
        print(f"export PREFECT_API_URL={current.api_url}")
        print(f"export PREFECT_SERVER_DATABASE_CONNECTION_URL='{current.db_url}'")
        return 0
    for name, pid in current.processes.items():
        print(f"{name:10} pid {pid:>7}  {'running' if _alive(pid) else 'GONE'}")
    pg = current.postgres and postgres.postmaster_pid(current.postgres)
    print(f"{'postgres':10} pid {pg or '-':>7}  {'running' if pg else 'GONE'}")
    if current.netns is not None:
        print(f"netns: bridge {current.netns.bridge} at {current.host_address}; "
              f"worker-k in namespace k of {', '.join(current.netns.namespaces)}")
    print(f"PREFECT_API_URL={current.api_url}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
