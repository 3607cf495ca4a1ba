"""Gold sets in the store: attached to a published prompt-set version, content-hashed,
never edited (a changed set gets a new version).

Layout: a catalog row per set (``gold_sets``) and its canonical JSON under
``gold/<prompt set version>/<version>-<sha256[:12]>.json``. What a set contains and how
a file is read is ``bench/gold.py``'s business; here it is data with an identity.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from essaybench.core.errors import UserError
from essaybench.core.files import write_atomically
from essaybench.core.hashing import canonical_json
from essaybench.core.sql import statement
from essaybench.store.store import Store


class GoldConflictError(UserError, ValueError):
    """A version already attached to the prompt set with other content."""


@dataclass(frozen=True)
class GoldRecord:
    prompt_set_version: str
    version: str
    sha256: str
    n_items: int
    n_criteria: int
    format: str
    source: str
    path: str  # relative to the store root
    created_at: datetime | None = None

    def identity(self) -> dict[str, Any]:
        """What a run records of the set it used."""
        return {"prompt_set_version": self.prompt_set_version, "version": self.version,
                "sha256": self.sha256}


def _records(store: Store, prompt_set_version: str | None) -> list[GoldRecord]:
    with store.connect() as con:
        rows = con.execute(statement("gold_sets_of"),
                           {"prompt_set_version": prompt_set_version}).fetchall()
    return [GoldRecord(*row) for row in rows]


def gold_sets(store: Store, prompt_set_version: str | None = None) -> list[GoldRecord]:
    """The sets attached to ``prompt_set_version`` (every version's: None), newest first
    within a prompt set."""
    return _records(store, prompt_set_version)


def attach_gold_set(store: Store, record: GoldRecord, content: Any) -> tuple[GoldRecord, bool]:
    """Store ``content`` (the set's canonical JSON data) under ``record``; (the record in
    the store, whether it is new). The same content attached again is the existing
    record; the same version with other content is a :class:`GoldConflictError`."""
    for old in _records(store, record.prompt_set_version):
        if old.sha256 == record.sha256:
            return old, False
        if old.version == record.version:
            raise GoldConflictError(
                f"gold version {record.version!r} is already attached to prompt set "
                f"{record.prompt_set_version} with other content (sha256 {old.sha256[:12]}, "
                f"from {old.source}): a published gold set is never edited, give the "
                "changed set a new version")
    rel = Path("gold") / record.prompt_set_version / f"{record.version}-{record.sha256[:12]}.json"
    write_atomically(store.root / rel, canonical_json(content).encode("utf-8"))
    stored = GoldRecord(**{**record.__dict__, "path": rel.as_posix(),
                           "created_at": datetime.now(UTC)})
    with store.connect() as con:
        con.execute(statement("insert_gold_set"), stored.__dict__)
    return stored, True


def read_gold_content(store: Store, record: GoldRecord) -> Any:
    path = store.root / record.path
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"gold set {record.version} of prompt set "
                        f"{record.prompt_set_version} is in the catalog but its file is "
                        f"missing: {path}") from None
