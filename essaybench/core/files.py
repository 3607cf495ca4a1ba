"""Writing a local file whole or not at all.

A reader (or a crash) never sees half a file: the bytes go to a hidden temp file in the
same folder, are fsynced, and only then take the file's name, by a rename (replacing
what was there) or a hard link (which fails when the name is taken, so two writers of one
name cannot both win). The folder is fsynced too, so the new name survives a crash.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable
from pathlib import Path

from essaybench.core.errors import UserError


class TargetExistsError(FileExistsError):
    """The file already exists and ``write_atomically`` was told not to replace it."""


class FolderNotWritableError(UserError, PermissionError):
    """The file's folder cannot be created: permission denied."""


def write_atomically(path: Path, data: bytes | Iterable[bytes], *, overwrite: bool = True,
                     keep_mode: bool = False) -> Path:
    """``data`` (bytes, or pieces of them written in turn) at ``path``, whole or not at
    all; returns ``path``.

    ``overwrite``: replace an existing file (a rename); else link the new file to its name,
    raising TargetExistsError when the name is taken. ``keep_mode``: a replaced file keeps
    its permission bits (a new one gets the umask's). The folder is created when missing
    (FolderNotWritableError when that is not permitted); any other failure is the OSError
    that caused it, and no temp file is left behind."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except PermissionError as exc:
        raise FolderNotWritableError(f"{path.parent}: cannot create the folder: "
                                     "permission denied") from exc
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    try:
        with open(tmp, "xb") as f:
            if isinstance(data, bytes):
                f.write(data)
            else:
                f.writelines(data)
            f.flush()
            os.fsync(f.fileno())
        if keep_mode:
            _copy_mode(path, tmp)
        if overwrite:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)  # fails when the name exists: no check-then-write race
            except FileExistsError:
                raise TargetExistsError(f"{path} already exists") from None
            except OSError:  # a file system without hard links
                if path.exists():
                    raise TargetExistsError(f"{path} already exists") from None
                os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(path.parent)
    return path


def _copy_mode(source: Path, target: Path) -> None:
    try:
        mode = source.stat().st_mode & 0o777
    except FileNotFoundError:
        return  # a new file: the umask decides
    os.chmod(target, mode)


def _fsync_dir(folder: Path) -> None:
    """Make the new name durable too (the file's own fsync does not cover its entry)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a directory
    finally:
        os.close(fd)
