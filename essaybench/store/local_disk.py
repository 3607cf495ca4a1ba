"""Is a folder on a network filesystem? The store must not be (docs/scale-out.md,
"Runbook: two or three hosts"): DuckDB's one-writer rule and the store's own lock rest on
file locks, which NFS, SMB, sshfs and most FUSE mounts do not keep across machines, and
DuckDB's write-ahead log wants a local disk's fsync. Read from the kernel's mount table
(Linux ``/proc/self/mounts``); elsewhere nothing is known and nothing is claimed."""

from __future__ import annotations

import os
from pathlib import Path

MOUNTS = Path("/proc/self/mounts")

# Filesystem types (the mount table's third field) whose locks or writes another machine
# may not see: network filesystems and FUSE mounts of remote storage.
NETWORK_TYPES = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "ceph", "glusterfs", "lustre", "afs",
    "davfs", "gfs2", "ocfs2", "beegfs", "gpfs", "virtiofs",
})
NETWORK_FUSE = frozenset({"sshfs", "s3fs", "rclone", "gcsfuse", "goofys", "mountpoint-s3",
                          "juicefs", "glusterfs", "cephfs", "davfs2", "smbnetfs"})


def _unescape(field: str) -> str:
    """The mount table writes spaces, tabs, newlines and backslashes as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def mount_of(path: Path, table: str) -> tuple[str, str] | None:
    """(mount point, filesystem type) of the mount holding ``path`` (absolute, resolved),
    from a mount table's text; None when no line covers it."""
    best: tuple[str, str] | None = None
    target = str(path)
    for line in table.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point, fstype = _unescape(fields[1]), fields[2]
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, fstype)  # the last of equal mount points is the one on top
    return best


def network_mount(path: Path, table: str | None = None) -> str | None:
    """How ``path`` (or, when it does not exist yet, the nearest folder above it) is on a
    network filesystem (e.g. "nfs4 mounted at /mnt/team"), else None. ``table``: a mount
    table's text; default the kernel's, when there is one."""
    if table is None:
        if not MOUNTS.is_file():
            return None
        table = MOUNTS.read_text(encoding="utf-8", errors="replace")
    probe = Path(os.path.abspath(path))
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    found = mount_of(probe.resolve(), table)
    if found is None:
        return None
    point, fstype = found
    sub = fstype.split(".", 1)[1] if fstype.startswith("fuse.") else None
    if fstype in NETWORK_TYPES or (sub is not None and sub in NETWORK_FUSE):
        return f"{fstype} mounted at {point}"
    return None
