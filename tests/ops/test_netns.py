"""``ops.netns`` with real namespaces: a process in namespace 1 reaches a TCP server on the
host bridge's address (seen from its own namespace address) but not one on the host's
127.0.0.1; ``cut`` partitions one namespace and ``heal`` joins it again while the other
keeps its link; ``teardown`` leaves no namespace or link, is idempotent, and works while a
process still runs inside. Needs root: skipped with ``unavailable()``'s reason otherwise.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from ops import netns
from ops.netns import Netns

CONNECT = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])) as s:
        print("ok", s.getsockname()[0], s.recv(64).decode())
except OSError as e:
    print(type(e).__name__)
"""


@pytest.fixture
def net() -> Iterator[Netns]:
    if (reason := netns.unavailable()) is not None:
        pytest.skip(reason)
    made = netns.create(2)
    try:
        yield made
    finally:
        assert netns.teardown(made) == []


@contextmanager
def tcp_server(host: str) -> Iterator[tuple[int, list[str]]]:
    """A TCP server on ``host``: greets each client with "hi", records its address."""
    peers: list[str] = []
    sock = socket.create_server((host, 0))
    sock.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, (peer, _) = sock.accept()
            except TimeoutError:
                continue
            with conn:
                peers.append(peer)
                conn.sendall(b"hi")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1], peers
    finally:
        stop.set()
        thread.join(5)
        sock.close()


def connect_from(net: Netns, k: int, host: str, port: int, timeout: float = 2.0) -> str:
    done = subprocess.run([*net.exec_prefix(k), sys.executable, "-c", CONNECT, host, str(port),
                           str(timeout)], capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.strip()


def ip_state() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                          check=True).stdout + subprocess.run(
        ["ip", "link", "show"], capture_output=True, text=True, check=True).stdout


def test_a_namespace_reaches_the_host_at_the_bridge_address_only(net: Netns) -> None:
    assert net.host_address.startswith("10.213.") and net.host_address.endswith(".1")
    with tcp_server(net.host_address) as (port, peers), tcp_server("127.0.0.1") as (lo, _):
        assert connect_from(net, 1, net.host_address, port) == f"ok {net.address(1)} hi"
        assert peers == [net.address(1)]  # the host sees the namespace's own address
        assert connect_from(net, 2, net.host_address, port) == f"ok {net.address(2)} hi"
        # 127.0.0.1 in a namespace is its own loopback (up, nothing listens): refused
        assert connect_from(net, 1, "127.0.0.1", lo) == "ConnectionRefusedError"


def test_cut_partitions_one_namespace_and_heal_joins_it_again(net: Netns) -> None:
    with tcp_server(net.host_address) as (port, _):
        netns.cut(net, 1)
        assert not connect_from(net, 1, net.host_address, port, 1.0).startswith("ok")
        assert connect_from(net, 2, net.host_address, port).startswith("ok")  # unaffected
        netns.heal(net, 1)
        deadline = time.monotonic() + 10
        while not (reply := connect_from(net, 1, net.host_address, port)).startswith("ok"):
            assert time.monotonic() < deadline, f"still cut after heal: {reply}"
            time.sleep(0.2)


def test_teardown_leaves_nothing_is_idempotent_and_beats_a_process_inside() -> None:
    if (reason := netns.unavailable()) is not None:
        pytest.skip(reason)
    t0 = time.monotonic()
    net = netns.create(2)
    made = time.monotonic() - t0
    names = [*net.namespaces, net.bridge, *(net.veth(k) for k in net.indices)]
    assert all(name in ip_state() for name in names)
    inside = subprocess.Popen([*net.exec_prefix(1), "sleep", "60"])
    try:
        t0 = time.monotonic()
        assert netns.teardown(net) == []
        removed = time.monotonic() - t0
        assert inside.poll() is None  # still running, its namespace unnamed and unlinked
    finally:
        inside.kill()
        inside.wait(5)
    state = ip_state()
    assert [name for name in names if name in state] == []
    assert netns.teardown(net) == []
    print(f"create(2) {made:.2f} s, teardown {removed:.2f} s")  # shown with pytest -s


def test_two_layouts_at_once_get_their_own_subnets() -> None:
    if (reason := netns.unavailable()) is not None:
        pytest.skip(reason)
    first = netns.create(1)
    try:
        second = netns.create(1)
        try:
            assert first.subnet != second.subnet and first.id != second.id
        finally:
            assert netns.teardown(second) == []
    finally:
        assert netns.teardown(first) == []


def test_unavailable_says_why_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    monkeypatch.setattr(netns, "_has_cap_net_admin", lambda: False)
    reason = netns.unavailable.__wrapped__()
    assert reason is not None and "root" in reason and "\n" not in reason
    monkeypatch.setattr(netns, "unavailable", lambda: reason)
    with pytest.raises(netns.NetnsError, match="need root"):
        netns.create(1)


def test_the_layout_names_fit_linux_interface_names() -> None:
    net = Netns(id="abc123", subnet="10.213.7.0/24", count=12)
    assert (net.bridge, net.host_address) == ("ebr-abc123", "10.213.7.1")
    assert (net.namespace(12), net.veth(12), net.address(12)) == (
        "eb-abc123-12", "ebv-abc123-12", "10.213.7.22")
    assert max(len(name) for name in (net.bridge, net.veth(12))) <= 15
    with pytest.raises(ValueError, match=r"1\.\.12"):
        net.namespace(0)
