"""A private PostgreSQL cluster for the Prefect server: ``initdb``, ``pg_ctl start/stop`` and
one database, listening on 127.0.0.1 only, with a generated password.

``initdb`` and ``postgres`` refuse to run as root, so as root both run as an unprivileged
system user (``postgres`` from Debian's package, else ``nobody``), and the cluster lives in
a directory of its own under the system temp folder owned by that user: the caller's state
directory (e.g. pytest's ``/tmp/pytest-of-root/…``, mode 700) is often not traversable by
it. Not as root, the cluster lives in the state directory and runs as the caller.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path

from pydantic import BaseModel, ConfigDict

DB_SUPERUSER = "essaybench"
DB_NAME = "prefect"
_SYSTEM_USERS = ("postgres", "nobody")


class PgCluster(BaseModel):
    """Where a cluster is and how to reach it (kept in the stack's state file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bindir: str
    root: str  # owns data/ and postgres.log; removed by purge()
    port: int
    password: str
    os_user: str | None  # the system user it runs as; None: the caller

    @property
    def data(self) -> Path:
        return Path(self.root) / "data"

    @property
    def log(self) -> Path:
        return Path(self.root) / "postgres.log"

    def url(self, driver: str = "postgresql+asyncpg", database: str = DB_NAME) -> str:
        return f"{driver}://{DB_SUPERUSER}:{self.password}@127.0.0.1:{self.port}/{database}"


def find_bindir() -> Path:
    """The directory of ``pg_ctl``: on PATH, else Debian's newest /usr/lib/postgresql/N/bin."""
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).resolve().parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
                      key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit()
                      else 0)
    if not versions:
        raise FileNotFoundError("PostgreSQL not found (no pg_ctl on PATH nor in "
                                "/usr/lib/postgresql/*/bin): apt-get install postgresql")
    return versions[-1].parent


def _system_user() -> str:
    for name in _SYSTEM_USERS:
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise LookupError(f"running as root and none of the users {_SYSTEM_USERS} exists to run "
                      "PostgreSQL as (initdb refuses root)")


def _run(cluster: PgCluster, args: list[str], timeout: float,
         env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a PostgreSQL program as the cluster's user, in a session of its own (the server
    pg_ctl forks must not share the caller's process group, nor get its Ctrl-C)."""
    user = cluster.os_user
    gid = pwd.getpwnam(user).pw_gid if user else None
    home = {"HOME": cluster.root} if user else {}
    return subprocess.run([str(Path(cluster.bindir) / args[0]), *args[1:]], capture_output=True,
                          text=True, timeout=timeout, check=False, start_new_session=True,
                          stdin=subprocess.DEVNULL, cwd=cluster.root,
                          env={**(env or os.environ), **home},
                          user=user, group=gid, extra_groups=[] if user else None)


def _check(done: subprocess.CompletedProcess[str], what: str) -> None:
    if done.returncode != 0:
        raise RuntimeError(f"{what} exited {done.returncode}: "
                           f"{(done.stdout + done.stderr).strip()[-2000:]}")


def init_cluster(state_dir: Path, port: int, timeout: float = 60.0) -> PgCluster:
    """A new cluster (``initdb``, UTF-8, password auth for everyone, no fsync: this is a
    scheduler's bookkeeping on one host, not the results, which live in the store)."""
    user: str | None = None
    if os.geteuid() == 0:
        entry = pwd.getpwnam(user := _system_user())
        root = Path(tempfile.mkdtemp(prefix="essaybench-pg-"))
        os.chown(root, entry.pw_uid, entry.pw_gid)
    else:
        root = state_dir / "postgres"
        root.mkdir(parents=True)
    cluster = PgCluster(bindir=str(find_bindir()), root=str(root), port=port,
                        password=secrets.token_hex(16), os_user=user)
    pwfile = root / "initdb-password"
    pwfile.write_text(cluster.password + "\n", encoding="utf-8")
    if user:
        os.chown(pwfile, pwd.getpwnam(user).pw_uid, -1)
    pwfile.chmod(0o600)
    try:
        done = _run(cluster, ["initdb", "-D", str(cluster.data), "-U", DB_SUPERUSER,
                              f"--pwfile={pwfile}", "--auth=scram-sha-256", "-E", "UTF8",
                              "--locale=C.UTF-8", "--no-sync"], timeout)
    finally:
        pwfile.unlink()
    _check(done, "initdb")
    return cluster


def start(cluster: PgCluster, env: Mapping[str, str], timeout: float = 60.0) -> None:
    """``pg_ctl start`` and wait until it accepts connections; on 127.0.0.1 only, its Unix
    socket in its own root. ``env`` is passed on (a process tag lets a sweep find it)."""
    options = (f"-c listen_addresses=127.0.0.1 -p {cluster.port} "
               f"-c unix_socket_directories={cluster.root} -c fsync=off "
               "-c max_connections=200")  # server + N workers' flow runs share it
    _check(_run(cluster, ["pg_ctl", "start", "-D", str(cluster.data), "-l", str(cluster.log),
                          "-w", "-t", str(int(timeout)), "-o", options], timeout + 10, env),
           f"pg_ctl start (log: {cluster.log})")


def query(cluster: PgCluster, sql: str, database: str = DB_NAME, timeout: float = 30.0) -> str:
    """``psql -tA -c sql`` over TCP with the password: its rows, ``|``-separated."""
    done = _run(cluster, ["psql", "-h", "127.0.0.1", "-p", str(cluster.port), "-U",
                          DB_SUPERUSER, "-d", database, "-v", "ON_ERROR_STOP=1", "-tAc", sql],
                timeout, {**os.environ, "PGPASSWORD": cluster.password})
    _check(done, "psql")
    return done.stdout.strip()


def create_database(cluster: PgCluster, timeout: float = 30.0) -> None:
    """The Prefect server's database, unless it exists (a restarted stack keeps its history)."""
    exists = query(cluster, f"SELECT 1 FROM pg_database WHERE datname = '{DB_NAME}'",
                   "postgres", timeout)
    if exists != "1":
        query(cluster, f"CREATE DATABASE {DB_NAME}", "postgres", timeout)


def postmaster_pid(cluster: PgCluster) -> int | None:
    """The server's pid while it runs (first line of postmaster.pid), else None."""
    try:
        pid = int((cluster.data / "postmaster.pid").read_text().split("\n", 1)[0])
        os.kill(pid, 0)
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None
    return pid


def stop(cluster: PgCluster, timeout: float = 30.0) -> None:
    """``pg_ctl stop -m fast`` (open sessions are cut, the cluster is consistent); SIGKILL
    to the postmaster if that does not finish in time."""
    if postmaster_pid(cluster) is None:
        return
    with suppress(subprocess.TimeoutExpired):
        _run(cluster, ["pg_ctl", "stop", "-D", str(cluster.data), "-m", "fast", "-w", "-t",
                       str(int(timeout))], timeout + 10)
    if (pid := postmaster_pid(cluster)) is not None:
        os.kill(pid, signal.SIGKILL)  # its backends exit when the postmaster is gone


def purge(cluster: PgCluster) -> None:
    """Delete the stopped cluster's files."""
    if postmaster_pid(cluster) is not None:
        raise RuntimeError(f"PostgreSQL in {cluster.root} still runs: stop it first")
    shutil.rmtree(cluster.root, ignore_errors=True)
