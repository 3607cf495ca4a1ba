"""Network namespaces for workers on one host: a Linux bridge with a private /24 on the host
(``ebr-<id>``, 10.213.X.1, X picked so no host address or route overlaps), and per worker k
a namespace ``eb-<id>-<k>`` joined to it by a veth pair: in the namespace ``eth0`` at
10.213.X.(10+k), ``lo`` up, the default route via the bridge; on the host ``ebv-<id>-<k>``,
enslaved to the bridge. A process in namespace k reaches the host only at the bridge address
(its 127.0.0.1 is its own), so every service it calls must listen there.

    net = create(2)                                  # namespaces 1 and 2
    subprocess.run([*net.exec_prefix(1), "prefect", "worker", "start", ...])
    cut(net, 1); heal(net, 1)                        # the host end of the link down / up
    teardown(net)                                    # idempotent; what is left (normally [])

Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and ``ip`` (iproute2); ``unavailable()`` says
why not in one line, so callers can fall back. The layout is a small record: saved in a
state file, it is all ``teardown`` needs, from any process, after a crash too.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import cache
from pathlib import Path
from uuid import uuid4

from pydantic import BaseModel, ConfigDict

SUPERNET = ipaddress.IPv4Network("10.213.0.0/16")
INNER_IF = "eth0"  # the namespace's end of its veth pair
_NETNS_DIR = Path("/run/netns")  # where `ip netns add` pins a namespace by name
_IP_TIMEOUT_S = 15.0


class NetnsError(RuntimeError):
    """One line: which ``ip`` command failed and why."""


class Netns(BaseModel):
    """One bridge and its namespaces 1..count (kept in the stack's state file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str  # a few hex digits: interface names are at most 15 characters
    subnet: str  # 10.213.X.0/24
    count: int

    @property
    def bridge(self) -> str:
        return f"ebr-{self.id}"

    @property
    def host_address(self) -> str:
        """Where the host's services listen and what processes in the namespaces dial."""
        return str(ipaddress.IPv4Network(self.subnet)[1])

    @property
    def indices(self) -> range:
        return range(1, self.count + 1)

    def namespace(self, k: int) -> str:
        self._check(k)
        return f"eb-{self.id}-{k}"

    def veth(self, k: int) -> str:
        """The host end of namespace k's link (``cut`` and ``heal`` act on it)."""
        self._check(k)
        return f"ebv-{self.id}-{k}"

    def address(self, k: int) -> str:
        self._check(k)
        return str(ipaddress.IPv4Network(self.subnet)[10 + k])

    def exec_prefix(self, k: int) -> list[str]:
        """Put before a command to run it in namespace k (same pid: ``ip`` execs it)."""
        return [_ip_binary(), "netns", "exec", self.namespace(k)]

    @property
    def namespaces(self) -> list[str]:
        return [self.namespace(k) for k in self.indices]

    def _check(self, k: int) -> None:
        if k not in self.indices:
            raise ValueError(f"namespace {k}: this layout has 1..{self.count}")


def _ip_binary() -> str:
    return shutil.which("ip") or shutil.which("ip", path="/usr/sbin:/sbin") or "ip"


def _ip(*args: str) -> str:
    try:
        done = subprocess.run([_ip_binary(), *args], capture_output=True, text=True,
                              timeout=_IP_TIMEOUT_S, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as failed:
        raise NetnsError(f"ip {' '.join(args)}: {failed}") from failed
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise NetnsError(f"ip {' '.join(args)}: {why}")
    return done.stdout


def _has_cap_net_admin() -> bool:
    try:
        status = Path("/proc/self/status").read_text(encoding="ascii")
    except OSError:
        return False
    eff = next((line.split()[1] for line in status.splitlines() if line.startswith("CapEff:")),
               "0")
    return bool(int(eff, 16) >> 12 & 1)  # CAP_NET_ADMIN is capability 12


@cache
def unavailable() -> str | None:
    """Why namespaces cannot be made here (one line), or None when they can. Probes once
    per process with a real bridge, namespace and veth pair (~0.1 s), then removes them."""
    if not sys.platform.startswith("linux"):
        return f"network namespaces need Linux (this is {sys.platform})"
    if shutil.which("ip") is None and shutil.which("ip", path="/usr/sbin:/sbin") is None:
        return "network namespaces need `ip` (iproute2), not found"
    if os.geteuid() != 0 and not _has_cap_net_admin():
        return "network namespaces need root (or CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    probe = Netns(id=f"p{uuid4().hex[:5]}", subnet="10.213.255.0/24", count=1)
    try:
        _ip("link", "add", probe.bridge, "type", "bridge")
        _ip("netns", "add", probe.namespace(1))
        _ip("link", "add", probe.veth(1), "type", "veth", "peer", "name", INNER_IF,
            "netns", probe.namespace(1))
    except NetnsError as failed:
        return f"network namespaces unavailable: {failed}"
    finally:
        teardown(probe)
    return None


def available() -> bool:
    return unavailable() is None


@contextmanager
def _subnet_lock() -> Iterator[None]:
    """Two stacks starting at once must not pick the same /24."""
    folder = Path("/run/lock") if Path("/run/lock").is_dir() else Path(tempfile.gettempdir())
    with (folder / "essaybench-netns.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _networks_in_use() -> list[ipaddress.IPv4Network]:
    used = []
    for entry in json.loads(_ip("-j", "-4", "addr", "show") or "[]"):
        for info in entry.get("addr_info", []):
            used.append(ipaddress.IPv4Network(f"{info['local']}/{info['prefixlen']}",
                                              strict=False))
    for route in json.loads(_ip("-j", "-4", "route", "show", "table", "all") or "[]"):
        dst = route.get("dst", "")
        if dst and dst != "default" and dst[0].isdigit():
            used.append(ipaddress.IPv4Network(dst, strict=False))
    return used


def _free_subnet() -> str:
    used = [n for n in _networks_in_use() if n.overlaps(SUPERNET) and n != SUPERNET]
    for candidate in list(SUPERNET.subnets(new_prefix=24))[1:255]:  # .0 and .255 stay unused
        if not any(candidate.overlaps(n) for n in used):
            return str(candidate)
    raise NetnsError(f"no free /24 left in {SUPERNET}")


def create(count: int) -> Netns:
    """The bridge and namespaces 1..count, each linked and addressed; on any failure what
    was made is removed and NetnsError says which step failed."""
    if count < 1:
        raise ValueError("count must be at least 1")
    if (reason := unavailable()) is not None:
        raise NetnsError(reason)
    with _subnet_lock():
        net = Netns(id=uuid4().hex[:6], subnet=_free_subnet(), count=count)
        try:
            _ip("link", "add", net.bridge, "type", "bridge")
            _ip("addr", "add", f"{net.host_address}/24", "dev", net.bridge)
        except NetnsError:
            teardown(net)
            raise
    try:
        _ip("link", "set", net.bridge, "up")
        for k in net.indices:
            name, veth = net.namespace(k), net.veth(k)
            _ip("netns", "add", name)
            _ip("link", "add", veth, "type", "veth", "peer", "name", INNER_IF, "netns", name)
            _ip("link", "set", veth, "master", net.bridge, "up")
            _ip("-n", name, "addr", "add", f"{net.address(k)}/24", "dev", INNER_IF)
            _ip("-n", name, "link", "set", INNER_IF, "up")
            _ip("-n", name, "link", "set", "lo", "up")
            _ip("-n", name, "route", "add", "default", "via", net.host_address)
    except BaseException:
        teardown(net)
        raise
    return net


def cut(net: Netns, k: int) -> None:
    """Partition namespace k: its link goes down (packets dropped, connections hang)."""
    _ip("link", "set", net.veth(k), "down")


def heal(net: Netns, k: int) -> None:
    _ip("link", "set", net.veth(k), "up")


def _link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def leftovers(net: Netns) -> list[str]:
    """This layout's namespaces and host links that still exist."""
    names = [n for n in net.namespaces if (_NETNS_DIR / n).exists()]
    links = [n for n in [*(net.veth(k) for k in net.indices), net.bridge] if _link_exists(n)]
    return names + links


def _quietly(present: bool, *args: str) -> None:
    if present:
        with suppress(NetnsError):  # what fails shows in what is left
            _ip(*args)


def teardown(net: Netns) -> list[str]:
    """Remove the namespaces, veth pairs and bridge of ``net``, whichever still exist
    (idempotent). Deleting the host end removes the pair even while a process still holds
    the namespace. Returns what could not be removed (normally nothing)."""
    for k in net.indices:
        _quietly(_link_exists(net.veth(k)), "link", "del", net.veth(k))
        _quietly((_NETNS_DIR / net.namespace(k)).exists(), "netns", "del", net.namespace(k))
    _quietly(_link_exists(net.bridge), "link", "del", net.bridge)
    return leftovers(net)
