"""``pull``: make a folder on any machine a readable copy of a store ``publish``
(``essaybench.store.publish``) shared through a part store.

Every file LATEST.json names is downloaded when the folder lacks it or holds other bytes
of it, checked against the manifest's size and SHA-256, and written whole or not at all;
the catalog (and ledger) last, swapped in under the lock a reader of the folder takes. A
pull that stops half-way is resumed by the next one. The folder's ``pulled.json`` says
where it came from; a pull into a folder that holds a store of its own, or one pulled from
elsewhere, is refused.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict

from essaybench.core.errors import NotFoundError, UserError
from essaybench.core.files import write_atomically
from essaybench.core.hashing import sha256_hex
from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S
from essaybench.store.lock import exclusive_lock
from essaybench.store.parts import PartStore
from essaybench.store.publish import (
    CATALOG_FILE,
    IMMUTABLE,
    LATEST,
    LEDGER_FILE,
    PREFIX,
    TRANSFERS,
    Counts,
    FileEntry,
    read_manifest,
)

PULLED_FILE = "pulled.json"  # in a pulled folder: where it came from


class PullResult(TypedDict):
    url: str
    dest: str
    downloaded: int
    skipped: int
    bytes: int
    catalog: str
    ledger: str | None
    published_at: str


def pull(parts: PartStore, dest: Path, *,
         lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> PullResult:
    """Make ``dest`` a copy of the store published at ``parts``: download every file it
    lacks or holds other bytes of, then swap in the catalog (and ledger)."""
    manifest = read_manifest(parts)
    if manifest is None:
        raise NotFoundError(f"nothing published at {parts.url} (no {parts.uri(LATEST)}): "
                            f"publish first with essaybench store publish --to {parts.url}")
    _check_dest(dest, parts.url)
    marker = dest / PULLED_FILE
    if not marker.is_file():  # first: a pull that stops half-way can be resumed
        write_atomically(marker, _json({"from": parts.url}))
    counts = Counts()

    def fetch(item: tuple[str, FileEntry]) -> None:
        rel, entry = item
        target = dest / rel
        if _up_to_date(target, entry, content_addressed=rel.split("/")[0] in IMMUTABLE):
            counts.skip()
            return
        write_atomically(target, _download(parts, f"{PREFIX}/{rel}", entry))
        counts.add(entry.bytes)

    with ThreadPoolExecutor(TRANSFERS) as pool:
        list(pool.map(fetch, sorted(manifest.files.items())))  # (list: raises the first error)
    for name, db in ((CATALOG_FILE, manifest.catalog), (LEDGER_FILE, manifest.ledger)):
        if db is None:
            continue
        target = dest / name
        entry = FileEntry(bytes=db.bytes, sha256=db.sha256)
        if _up_to_date(target, entry) and not _wal(target).exists():
            counts.skip()
            continue
        tmp = write_atomically(target.with_name(f".{name}.pull"),
                                _download(parts, db.path, entry))
        try:  # under the lock a reader of this folder takes: none has the old file open
            with exclusive_lock(target.with_suffix(".lock"), lock_timeout_s):
                _wal(target).unlink(missing_ok=True)  # a WAL belongs to the file it replaces
                os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        counts.add(db.bytes)
    write_atomically(marker, _json({
        "from": parts.url, "catalog": manifest.catalog.path,
        "ledger": manifest.ledger.path if manifest.ledger else None,
        "published_at": manifest.published_at.isoformat(),
        "pulled_at": datetime.now(UTC).isoformat()}))
    return PullResult(url=parts.url, dest=str(dest), downloaded=counts.done,
                      skipped=counts.skipped, bytes=counts.bytes, catalog=manifest.catalog.path,
                      ledger=manifest.ledger.path if manifest.ledger else None,
                      published_at=manifest.published_at.isoformat())


def _check_dest(dest: Path, url: str) -> None:
    """``dest`` is empty, or a folder pulled from ``url`` before: never a store of its own."""
    if dest.exists() and not dest.is_dir():
        raise UserError(f"{dest} is a file, not a folder")
    marker = dest / PULLED_FILE
    if not marker.is_file():
        if (dest / CATALOG_FILE).exists():
            raise UserError(f"{dest} holds a store of its own (its catalog was not pulled): "
                            "pull into an empty folder or one pulled before")
        return
    try:
        source = json.loads(marker.read_text(encoding="utf-8")).get("from")
    except (ValueError, AttributeError):
        source = None
    if source != url:
        raise UserError(f"{dest} was pulled from {source}, not {url}: pull into another folder")


def _json(obj: dict[str, str | None]) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def _wal(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


def _up_to_date(target: Path, entry: FileEntry, *, content_addressed: bool = False) -> bool:
    if not target.is_file() or target.stat().st_size != entry.bytes:
        return False
    return content_addressed or sha256_hex(target.read_bytes()) == entry.sha256


def _download(parts: PartStore, rel: str, entry: FileEntry) -> bytes:
    data = parts.read_bytes(rel)
    if len(data) != entry.bytes or sha256_hex(data) != entry.sha256:
        raise UserError(f"{parts.uri(rel)} is not the file LATEST.json names (another publish "
                        "is replacing it?): pull again")
    return data
