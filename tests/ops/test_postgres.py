"""The private PostgreSQL cluster of ``ops.postgres``: created (as an unprivileged user when
the test runs as root), reachable on 127.0.0.1 with its password only, stopped and purged.
Two initdb runs: ~20 s on the busy shared host, so slow-marked; skipped without PostgreSQL."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import psutil  # type: ignore[import-untyped]
import pytest

from ops import postgres
from ops.local_stack import free_port

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[postgres.PgCluster]:
    try:
        postgres.find_bindir()
    except FileNotFoundError as missing:
        pytest.skip(f"{missing} (./dev test installs it when run as root)")
    made = postgres.init_cluster(tmp_path, free_port())
    yield made
    postgres.stop(made)
    postgres.purge(made)


def listening_addresses(pid: int) -> set[str]:
    """The local addresses the process listens on over TCP (IPv4 and IPv6)."""
    return {c.laddr.ip for c in psutil.Process(pid).net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN}


def test_cluster_serves_its_database_to_its_password_only(cluster: postgres.PgCluster) -> None:
    if os.geteuid() == 0:  # initdb refuses root: the cluster is owned by a system user
        assert cluster.os_user in ("postgres", "nobody")
        assert Path(cluster.root).stat().st_uid != 0
    postgres.start(cluster, dict(os.environ))
    pid = postgres.postmaster_pid(cluster)
    assert pid is not None
    postgres.create_database(cluster)
    postgres.create_database(cluster)  # a restarted stack finds it there: no error
    assert postgres.query(cluster, "SELECT current_database(), current_user") == \
        f"{postgres.DB_NAME}|{postgres.DB_SUPERUSER}"
    assert cluster.url().startswith(f"postgresql+asyncpg://{postgres.DB_SUPERUSER}:")

    wrong = subprocess.run(
        [str(Path(cluster.bindir) / "psql"), "-h", "127.0.0.1", "-p", str(cluster.port), "-U",
         postgres.DB_SUPERUSER, "-d", postgres.DB_NAME, "-w", "-c", "SELECT 1"],
        capture_output=True, text=True, timeout=30, check=False,
        env={**os.environ, "PGPASSWORD": "not-" + cluster.password})
    assert wrong.returncode != 0 and "password authentication failed" in wrong.stderr

    # Listening on loopback only, as the kernel sees it (no connection to another address:
    # a test sends traffic to loopback only): every TCP socket of the postmaster in LISTEN.
    assert listening_addresses(pid) == {"127.0.0.1"}
    assert postgres.query(cluster, "SHOW listen_addresses") == "127.0.0.1"

    postgres.stop(cluster)
    assert postgres.postmaster_pid(cluster) is None
    # Gone, or a zombie its parent (init here, after pg_ctl's fork) has not reaped yet.
    with suppress(psutil.NoSuchProcess):
        assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    postgres.purge(cluster)
    assert not Path(cluster.root).exists()


def test_purge_refuses_a_running_cluster(cluster: postgres.PgCluster) -> None:
    postgres.start(cluster, dict(os.environ))
    with pytest.raises(RuntimeError, match="still runs"):
        postgres.purge(cluster)
    assert cluster.data.is_dir()
