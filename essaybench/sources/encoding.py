"""Decode raw files: UTF-8 with or without BOM, UTF-16 with BOM, or GB18030.

Detection is strict decoding in a fixed order rather than a statistical guess:
a BOM decides; otherwise valid UTF-8 is UTF-8 (GB18030 text with any non-ASCII
character is almost never valid UTF-8); otherwise GB18030, whose decoder also
rejects invalid byte sequences.

``detect_encoding`` makes that choice by decoding the file a chunk at a time, and
``iter_lines`` then streams its lines: a raw source is never held whole.
"""

from __future__ import annotations

import codecs
import sys
from collections.abc import Iterator
from pathlib import Path

from essaybench.core.errors import UserError


class SourceReadError(UserError, OSError):
    """A raw file cannot be read or decoded; the message names the file."""


CHUNK_BYTES = 1 << 18  # what the streaming readers decode at once (a 256 KiB piece)


def check_file(path: Path) -> None:
    """A clear error naming a missing or unreadable file, before anything is read."""
    if not path.exists():
        raise SourceReadError(f"raw source file not found: {path}")
    if not path.is_file():
        raise SourceReadError(f"raw source path is not a file: {path}")
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise SourceReadError(f"raw source file unreadable: {path}: {exc.strerror}") from exc


def detect_encoding(path: Path, encoding: str = "auto") -> str:
    """The codec of the file at ``path`` (``encoding``, checked, or the first of a BOM's,
    UTF-8 and GB18030 that decodes the whole file strictly), found a chunk at a time
    (memory: one chunk, whatever the file's size)."""
    check_file(path)
    if encoding != "auto":
        bad = _first_bad_byte(path, encoding)
        if bad is not None:
            raise SourceReadError(f"{path}: not valid {encoding} at byte {bad[0]}: {bad[1]}")
        return encoding
    with path.open("rb") as fh:
        head = fh.read(4)
    for bom, codec in ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
                       (codecs.BOM_UTF16_BE, "utf-16")):
        if head.startswith(bom):
            bad = _first_bad_byte(path, codec)
            if bad is not None:
                raise SourceReadError(
                    f"{path}: has a {codec} byte-order mark but is not valid {codec} "
                    f"at byte {bad[0]}: {bad[1]}")
            return codec
    if _first_bad_byte(path, "utf-8") is None:
        return "utf-8"
    bad = _first_bad_byte(path, "gb18030")
    if bad is None:
        return "gb18030"
    raise SourceReadError(
        f"{path}: neither UTF-8 nor GB18030 (first bad byte at offset {bad[0]}); "
        "set the source's encoding explicitly")


def _first_bad_byte(path: Path, codec: str) -> tuple[int, str] | None:
    """(offset in the file, reason) of the first byte ``codec`` cannot decode, or None."""
    skip = 0
    if codec == "utf-8-sig":  # the mark, then UTF-8 (its decoder's state hides the mark)
        with path.open("rb") as fh:
            skip = len(codecs.BOM_UTF8) if fh.read(3) == codecs.BOM_UTF8 else 0
        codec = "utf-8"
    decoder = codecs.getincrementaldecoder(_stream_codec(path, codec))("strict")
    offset = skip
    with path.open("rb") as fh:
        fh.seek(skip)
        while True:
            chunk = fh.read(CHUNK_BYTES)
            pending = len(decoder.getstate()[0])  # bytes held from the previous chunk
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as exc:
                return offset - pending + exc.start, exc.reason
            if not chunk:
                return None
            offset += len(chunk)


def iter_lines(path: Path, encoding: str = "auto") -> Iterator[str]:
    """The file's lines, terminators kept, split at \\n, \\r\\n and \\r only (as
    ``io.StringIO(text, newline="").readlines()`` splits the decoded text), read a
    chunk at a time after ``detect_encoding`` has checked the whole file."""
    codec = _stream_codec(path, detect_encoding(path, encoding))
    try:
        with path.open(encoding=codec, errors="strict", newline="") as fh:
            yield from fh
    except UnicodeError as exc:  # the file changed after detection checked it
        raise SourceReadError(f"{path}: changed while it was read: no longer valid {codec} "
                              f"({exc}); read it again once it is complete") from exc


def _stream_codec(path: Path, codec: str) -> str:
    """The codec that decodes the file a chunk at a time as ``bytes.decode(codec)`` would
    decode it whole: UTF-16's incremental decoder refuses a file without a byte-order mark (a
    bare UnicodeError), which ``bytes.decode`` reads in the machine's byte order."""
    if codec != "utf-16":
        return codec
    with path.open("rb") as fh:
        head = fh.read(2)
    if head in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        return codec
    return "utf-16-le" if sys.byteorder == "little" else "utf-16-be"
