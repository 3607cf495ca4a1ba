"""Decode raw files: UTF-8 with or without BOM, UTF-16 with BOM, or GB18030.

Detection is strict decoding in a fixed order rather than a statistical guess:
a BOM decides; otherwise valid UTF-8 is UTF-8 (GB18030 text with any non-ASCII
character is almost never valid UTF-8); otherwise GB18030, whose decoder also
rejects invalid byte sequences.
"""

from __future__ import annotations

import codecs
from pathlib import Path

from essaybench.core.errors import UserError


class SourceReadError(UserError, OSError):
    """A raw file cannot be read or decoded; the message names the file."""


def read_bytes(path: Path) -> bytes:
    if not path.exists():
        raise SourceReadError(f"raw source file not found: {path}")
    if not path.is_file():
        raise SourceReadError(f"raw source path is not a file: {path}")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SourceReadError(f"raw source file unreadable: {path}: {exc.strerror}") from exc


def decode(data: bytes, path: Path, encoding: str = "auto") -> tuple[str, str]:
    """Return (text, encoding used)."""
    if encoding != "auto":
        try:
            return data.decode(encoding), encoding
        except UnicodeDecodeError as exc:
            raise SourceReadError(
                f"{path}: not valid {encoding} at byte {exc.start}: {exc.reason}"
            ) from exc
    if data.startswith(codecs.BOM_UTF8):
        return _strict(data, "utf-8-sig", path), "utf-8-sig"
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return _strict(data, "utf-16", path), "utf-16"
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("gb18030"), "gb18030"
    except UnicodeDecodeError as exc:
        raise SourceReadError(
            f"{path}: neither UTF-8 nor GB18030 (first bad byte at offset {exc.start}); "
            "set the source's encoding explicitly"
        ) from exc


def _strict(data: bytes, encoding: str, path: Path) -> str:
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise SourceReadError(
            f"{path}: has a {encoding} byte-order mark but is not valid {encoding} "
            f"at byte {exc.start}: {exc.reason}"
        ) from exc
