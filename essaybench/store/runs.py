"""Benchmark runs in the catalog: what each run is, and whose LLM calls it may reuse.

A run is recorded once, when it starts (``record_run``): a new run (``kind`` "run"), or
a rerun continuing ``base_run`` from one of its stages. Its reuse scope, the runs whose
recorded calls it may be served instead of paying again, is resolved then and stored
with it, so lineage is data: a new run's scope is itself (plus, when asked with
``reuse_from``, that run's scope); a rerun's is itself plus its base run's scope, so a
rerun of a rerun follows the whole chain.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from essaybench.core.errors import NotFoundError
from essaybench.core.hashing import file_sha256
from essaybench.core.sql import statement
from essaybench.core.version import code_version
from essaybench.store.store import Store

RUN_ID = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{6}")  # as new_run_id makes them


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    kind: str
    base_run: str | None
    from_stage: str | None
    reuse_from: str | None
    reuse_scope: tuple[str, ...]  # itself first
    reuse_unattributed: bool
    config_path: str | None
    config_sha256: str | None
    flow_run_id: str | None
    code_version: str
    created_at: datetime


@dataclass(frozen=True)
class StageRunInputs:
    """What a stage run read and with which parameters (whatever its status)."""

    run_id: str
    stage: str
    status: str
    snapshot_id: str | None
    upstream_snapshot_ids: tuple[str, ...]
    params: dict[str, Any]
    started_at: datetime


def get_runs(store: Store, run_ids: list[str]) -> dict[str, RunRecord]:
    with store.connect() as con:
        rows = con.execute(statement("get_runs"), {"run_ids": run_ids}).fetchall()
    return {r[0]: RunRecord(r[0], r[1], r[2], r[3], r[4], tuple(r[5]), bool(r[6]), r[7], r[8],
                            r[9], r[10], r[11]) for r in rows}


def get_run(store: Store, run_id: str) -> RunRecord | None:
    return get_runs(store, [run_id]).get(run_id)


def stage_run_inputs(store: Store, *, run_id: str | None = None,
                     snapshot_id: str | None = None) -> list[StageRunInputs]:
    """The stage runs of ``run_id``, or the one that wrote ``snapshot_id``; newest first."""
    with store.connect() as con:
        rows = con.execute(statement("find_stage_runs"),
                           {"run_id": run_id, "snapshot_id": snapshot_id}).fetchall()
    return [StageRunInputs(r[0], r[1], r[2], r[3], tuple(r[4]), json.loads(r[5]), r[6])
            for r in rows]


def run_is_known(store: Store, run_id: str) -> bool:
    """Recorded as a run, or (a run from before runs were recorded) has a stage run."""
    return get_run(store, run_id) is not None or bool(stage_run_inputs(store, run_id=run_id))


def _lent_scope(store: Store, lender: str, role: str) -> tuple[tuple[str, ...], bool]:
    """The runs whose calls ``lender`` may serve, and whether that includes calls recorded
    before run ids; ``role`` names the lender in the error."""
    record = get_run(store, lender)
    if record is not None:
        return record.reuse_scope, record.reuse_unattributed
    if not stage_run_inputs(store, run_id=lender):
        raise NotFoundError(f"{role}: no run {lender!r} in {store.root}")
    # A run from before runs were recorded: its calls carry no run id, so which of the
    # unattributed calls it paid for is unknown; continuing it may serve them all.
    return (lender,), True


def record_run(
    store: Store, run_id: str, *, base_run: str | None = None, from_stage: str | None = None,
    reuse_from: str | None = None, config_path: str | Path | None = None,
    flow_run_id: str | None = None,
) -> RunRecord:
    """Record ``run_id`` (a rerun of ``base_run`` when given) with its reuse scope, and
    return what the catalog holds: recording a run again keeps the first record. A
    ``base_run`` or ``reuse_from`` the store does not know is a ``LookupError``."""
    existing = get_run(store, run_id)
    if existing is not None:
        return existing
    scope: list[str] = [run_id]
    unattributed = False
    for lender, role in ((base_run, "base run"), (reuse_from, "--reuse-from")):
        if lender is None:
            continue
        lent, lent_unattributed = _lent_scope(store, lender, role)
        scope.extend(r for r in lent if r not in scope)
        unattributed = unattributed or lent_unattributed
    config = Path(config_path) if config_path is not None else None
    with store.connect() as con:
        con.execute(statement("insert_run"), {
            "run_id": run_id, "kind": "rerun" if base_run is not None else "run",
            "base_run": base_run, "from_stage": from_stage, "reuse_from": reuse_from,
            "reuse_scope": scope, "reuse_unattributed": unattributed,
            "config_path": None if config is None else str(config),
            "config_sha256": file_sha256(config) if config is not None and config.is_file()
            else None,
            "flow_run_id": flow_run_id, "code_version": code_version(),
            "created_at": datetime.now(UTC),
        })
    recorded = get_run(store, run_id)
    assert recorded is not None
    return recorded


def looks_like_run_id(text: str) -> bool:
    """Is ``text`` shaped like the ids ``new_run_id`` makes?"""
    return RUN_ID.fullmatch(text) is not None
