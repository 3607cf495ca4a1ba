"""The readers' decoding of a whole file in memory, as they did before they streamed: the
oracle the streaming detection (``essaybench.sources.encoding``) is checked against."""

from __future__ import annotations

import codecs
from pathlib import Path

from essaybench.sources.encoding import SourceReadError


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
        # utf-8-sig counts from after its mark; the file's offset is what a user looks up
        start = exc.start + (len(codecs.BOM_UTF8) if encoding == "utf-8-sig" else 0)
        raise SourceReadError(
            f"{path}: has a {encoding} byte-order mark but is not valid {encoding} "
            f"at byte {start}: {exc.reason}"
        ) from exc
