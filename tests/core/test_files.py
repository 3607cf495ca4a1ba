"""Atomic file writes: whole or not at all, no overwrite when told, mode bits kept when
asked, and no temp file left behind."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from essaybench.core.files import TargetExistsError, write_atomically


def test_a_file_is_written_and_replaced(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "f.json"
    assert write_atomically(path, b"one") == path
    write_atomically(path, b"two")
    assert path.read_bytes() == b"two"
    assert sorted(p.name for p in path.parent.iterdir()) == ["f.json"]


def test_an_existing_file_is_kept_when_told_not_to_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    write_atomically(path, b"first", overwrite=False)
    with pytest.raises(TargetExistsError, match="already exists") as err:
        write_atomically(path, b"second", overwrite=False)
    assert isinstance(err.value, FileExistsError)
    assert path.read_bytes() == b"first"
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]


def test_mode_bits_are_kept_only_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_bytes(b"old")
    path.chmod(0o640)
    write_atomically(path, b"new", keep_mode=True)
    assert (path.read_bytes(), path.stat().st_mode & 0o777) == (b"new", 0o640)
    write_atomically(path, b"newer")  # without keep_mode: the umask's bits
    assert path.stat().st_mode & 0o777 == 0o666 & ~_umask()
    fresh = write_atomically(tmp_path / "new.yaml", b"x", keep_mode=True)
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_failed_write_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "dir"
    path.mkdir()  # a folder where the file should go: the rename fails
    with pytest.raises(OSError):
        write_atomically(path, b"data")
    assert [p.name for p in tmp_path.iterdir()] == ["dir"]


def test_pieces_are_written_in_turn_and_a_failing_piece_keeps_the_old_file(
        tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    write_atomically(path, (f"<p>{i}</p>".encode() for i in range(3)))
    assert path.read_bytes() == b"<p>0</p><p>1</p><p>2</p>"

    def failing() -> Iterator[bytes]:
        yield b"half a page"
        raise RuntimeError("the template failed")

    with pytest.raises(RuntimeError, match="template failed"):
        write_atomically(path, failing())
    assert path.read_bytes() == b"<p>0</p><p>1</p><p>2</p>"
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]
