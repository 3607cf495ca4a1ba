"""The store's network-filesystem check reads the kernel's mount table: the mount holding
a path is the longest mount point above it (the last one of equal points is on top)."""

from __future__ import annotations

from pathlib import Path

import pytest

from essaybench.store.local_disk import mount_of, network_mount


def _table(*mounts: tuple[str, str]) -> str:
    lines = ["/dev/sda1 / ext4 rw,relatime 0 0"]
    lines += [f"server:/export {point.replace(' ', chr(92) + '040')} {fstype} rw 0 0"
              for point, fstype in mounts]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("fstype", "network"), [
    ("nfs4", True), ("nfs", True), ("cifs", True), ("smb3", True), ("fuse.sshfs", True),
    ("fuse.s3fs", True), ("fuse.rclone", True), ("ext4", False), ("xfs", False),
    ("overlay", False), ("tmpfs", False), ("fuse.portal", False),
])
def test_network_filesystems_are_named(tmp_path: Path, fstype: str, network: bool) -> None:
    table = _table((str(tmp_path), fstype))
    found = network_mount(tmp_path / "store", table)  # not made yet: the folder above counts
    assert (found == f"{fstype} mounted at {tmp_path}") is network, found


def test_a_local_mount_inside_a_network_one_is_local(tmp_path: Path) -> None:
    inner = tmp_path / "disk"
    inner.mkdir()
    table = _table((str(tmp_path), "nfs4"), (str(inner), "ext4"))
    assert network_mount(inner / "store", table) is None
    assert network_mount(tmp_path / "elsewhere", table) == f"nfs4 mounted at {tmp_path}"
    # A prefix of the name is not a parent folder: /x/disk2 is not under /x/disk.
    assert mount_of(Path(f"{inner}2"), table) == (str(tmp_path), "nfs4")


def test_mount_points_with_spaces_and_mounts_on_top(tmp_path: Path) -> None:
    spaced = tmp_path / "team share"
    spaced.mkdir()
    assert network_mount(spaced, _table((str(spaced), "cifs"))) == f"cifs mounted at {spaced}"
    on_top = _table((str(tmp_path), "ext4"), (str(tmp_path), "nfs4"))
    assert network_mount(tmp_path, on_top) == f"nfs4 mounted at {tmp_path}"


def test_this_hosts_temporary_folder_is_not_called_remote(tmp_path: Path) -> None:
    assert network_mount(tmp_path) is None  # the kernel's own table (None off Linux too)
