"""The durable record of provider batches, in the call ledger's DuckDB file.

A submission is recorded (its keys, then its row in state ``submitting``) before the batch
is created at the provider, and its provider id as soon as the provider gives it, so a
process killed at any point leaves enough for the next one to find the batch again instead
of paying for it twice (``runner``). Every statement commits on its own, under the ledger's
connection lock; the row is written after its keys, so a submission is never seen half
written.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from essaybench.core.sql import statement
from essaybench.llm.ledger import Ledger

__all__ = ["BatchJournal", "Submission"]


@dataclass(frozen=True)
class Submission:
    """One batch of ours: its id, the provider's (None while submitting), and its keys."""

    submission_id: str
    batch_id: str | None
    provider: str
    model: str
    state: str
    created_at: datetime
    keys: tuple[str, ...]


class BatchJournal:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger.open()
        self.ledger.query(statement("batch_schema"))

    def open_submissions(self, keys: Sequence[str], run_id: str | None) -> list[Submission]:
        """The unfinished submissions of run ``run_id`` holding any of ``keys`` (all of
        each one's keys among ``keys``)."""
        rows = self.ledger.query(statement("batch_open_items"),
                                 {"keys": sorted(set(keys)), "run": run_id})
        found: dict[str, dict[str, Any]] = {}
        for row in rows:
            entry = found.setdefault(row["submission_id"], {**row, "keys": []})
            entry["keys"].append(row["key"])
        return [Submission(e["submission_id"], e["batch_id"], e["provider"], e["model"],
                           e["state"], e["created_at"], tuple(e["keys"]))
                for e in found.values()]

    def begin(self, provider: str, model: str, endpoint: str, run_id: str | None,
              keys: Sequence[str]) -> Submission:
        """Record a submission about to be created (state ``submitting``)."""
        sid = "eb_" + uuid.uuid4().hex
        now = datetime.now(UTC)
        self.ledger.query(statement("batch_insert_items"), {"submission_id": sid,
                                                            "keys": list(keys)})
        self.ledger.query(statement("batch_insert"), {
            "submission_id": sid, "provider": provider, "model": model, "endpoint": endpoint,
            "run": run_id, "n_items": len(keys), "now": now})
        return Submission(sid, None, provider, model, "submitting", now, tuple(keys))

    def update(self, sid: str, state: str, *, batch_id: str | None = None,
               provider_status: str | None = None, error: str | None = None) -> None:
        self.ledger.query(statement("batch_update"), {
            "submission_id": sid, "state": state, "batch_id": batch_id,
            "provider_status": provider_status, "error": error, "now": datetime.now(UTC)})

    def rounds(self, keys: Sequence[str], run_id: str | None) -> Counter[str]:
        """How many submissions of run ``run_id`` each of ``keys`` was in (a submission
        never created at the provider not counted)."""
        rows = self.ledger.query(statement("batch_rounds"),
                                 {"keys": sorted(set(keys)), "run": run_id})
        return Counter({r["key"]: int(r["n"]) for r in rows})

    def settled_since(self, keys: Sequence[str], run_id: str | None) -> datetime | None:
        """When the first collected submission of run ``run_id`` holding any of ``keys``
        was created (None: none was): their rows since then are the run's answers."""
        rows = self.ledger.query(statement("batch_settled_items"),
                                 {"keys": sorted(set(keys)), "run": run_id})
        return min((r["since"] for r in rows), default=None)

    def known_batch_ids(self) -> set[str]:
        rows = self.ledger.query("SELECT batch_id FROM llm_batches WHERE batch_id IS NOT NULL")
        return {r["batch_id"] for r in rows}

    def rows(self) -> list[dict[str, Any]]:
        """Every submission (newest last), for reports and tests."""
        return self.ledger.query("SELECT * FROM llm_batches ORDER BY created_at")
