"""What a run's report reads from the store: snapshots, the stats tables, alerts, drift.

Everything comes from the run's successful stage rows in the catalog and the snapshots
they wrote (the judge snapshot found along the run's own stages when the run reused an
earlier run's, e.g. a rerun from ``aggregate``). A stage that did not run leaves its
part empty, with the reason the report shows; only a run with no judgments at all is an
error (there is nothing to report).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from essaybench.bench.alerts import Alert, alerts_of_frame
from essaybench.bench.flagged_rule import (
    RECORDED_BEFORE,
    FlaggedRule,
    flagged_rule_of,
    rule_of_meta,
)
from essaybench.core.contracts import OK
from essaybench.core.errors import NotFoundError
from essaybench.runs.calibration import run_drift
from essaybench.runs.compare import compare_snapshots
from essaybench.runs.health import run_health
from essaybench.runs.rotation import compared_prompts
from essaybench.store import Snapshot, Store
from essaybench.store.runs import stage_run_inputs
from essaybench.store.store import StageRun

STATS_FOLDER = "stats"  # <store>/reports/<run>/stats/, as the stats stage writes it
READERS_OF_JUDGE = ("aggregate", "stats", "alerts")  # stages whose first upstream is judge


@dataclass(frozen=True)
class AlertsView:
    """The run's alerts stage: its alerts and what it compared with (or why nothing)."""

    alerts: list[Alert]
    base_run: str | None
    reason: str | None
    deliveries: list[str]
    judges_not_compared: dict[str, str]
    comparison: pl.DataFrame | None  # this run against base_run, per judge × model
    signals: dict[str, Any] = field(default_factory=dict)  # bench/signals: drift, relevance
    compared_on: str | None = None  # rotation: compared on the core only (runs/rotation.py)
    core_prompts: tuple[str, ...] = ()  # rotation: the run's core prompt ids


@dataclass(frozen=True)
class Notes:
    """Why a part of the report is empty (None: it is not)."""

    stats: str | None = None
    pairwise: str | None = None
    alerts: str | None = None


@dataclass(frozen=True)
class RunData:
    """Everything the report shows about one run; None / empty: that stage did not run
    (``notes`` says why)."""

    run_id: str
    store_root: Path
    essays: pl.DataFrame
    judgments: pl.DataFrame
    pairwise: pl.DataFrame | None
    stats: dict[str, pl.DataFrame]
    alerts: AlertsView | None
    drift: dict[str, dict[str, Any]] | None
    health: str | None
    stage_runs: list[StageRun]
    snapshots: dict[str, str]  # stage → the snapshot id read
    notes: Notes = field(default_factory=Notes)
    # how flagged judgments count in the leaderboard (bench/flagged_rule.py), as the run's
    # stats (else aggregate) stage counted them
    flagged_rule: FlaggedRule = RECORDED_BEFORE


def find_judged(store: Store, run_id: str) -> Snapshot:
    """The run's judge snapshot: its own, else the one its aggregate, stats or alerts
    stage read (a rerun that did not judge)."""
    own = store.latest_ok_snapshot("judge", run_id)
    if own is not None:
        return own
    for stage in READERS_OF_JUDGE:
        reader = store.latest_ok_snapshot(stage, run_id)
        if reader is not None and reader.upstream_snapshot_ids:
            judged = store.get_snapshot(reader.upstream_snapshot_ids[0])
            if judged.stage == "judge":
                return judged
    raise NotFoundError(f"report: run {run_id} has no successful judge stage in {store.root} "
                        "(nor a stage that read one): there are no scores to report")


def _stats_tables(store: Store, run_id: str, judged: Snapshot) -> tuple[dict[str, pl.DataFrame],
                                                                        str | None]:
    snap = store.latest_ok_snapshot("stats", run_id)
    if snap is None:
        return {}, (f"the stats stage did not run for run {run_id} (no confidence intervals, "
                    f"paired differences or rankings): essaybench stats --run {run_id}")
    if not snap.upstream_snapshot_ids or snap.upstream_snapshot_ids[0] != judged.snapshot_id:
        return {}, f"the stats stage of run {run_id} read other judgments than the report's"
    folder = store.root / "reports" / run_id / STATS_FOLDER
    tables = {p.stem: pl.read_parquet(p) for p in sorted(folder.glob("*.parquet"))}
    if not tables:
        return {}, f"the stats stage's tables are missing from {folder}"
    return tables, None


def _comparison(store: Store, run_id: str, snap: Snapshot, judged: Snapshot
                ) -> pl.DataFrame | None:
    """This run against the run its alerts stage compared with, as that stage did (its
    score, bootstrap size, level and seed, from its catalog row)."""
    if len(snap.upstream_snapshot_ids) < 2:
        return None
    before = store.get_snapshot(snap.upstream_snapshot_ids[1])
    base = next((r.run_id for r in stage_run_inputs(store, snapshot_id=before.snapshot_id)
                 if r.stage == "judge"), None)
    core, _ = compared_prompts(store, run_id, base)  # rotation: the core only
    if core == set():
        return None
    params: dict[str, Any] = next(
        (r.params for r in stage_run_inputs(store, run_id=run_id)
         if r.stage == "alerts" and r.snapshot_id == snap.snapshot_id), {})
    return compare_snapshots(store, judged, before, score=params.get("score", "score_weighted"),
                             n_boot=params.get("n_boot", 2000),
                             level=params.get("level", 0.95), seed=params.get("seed", 0),
                             flagged=rule_of_meta(params) or RECORDED_BEFORE, prompts=core)


def _alerts(store: Store, run_id: str, stage_runs: list[StageRun], judged: Snapshot
            ) -> AlertsView | None:
    for row in stage_runs:  # newest first
        if row.stage == "alerts" and row.status == OK and row.snapshot_id:
            snap = store.get_snapshot(row.snapshot_id)
            meta = row.meta or {}
            not_compared: dict[str, str] = dict(meta.get("judges_not_compared") or {})
            compared = _comparison(store, run_id, snap, judged)
            if compared is not None:  # as the alerts stage: judges that drifted are not
                compared = compared.filter(~pl.col("judge").is_in(list(not_compared)))
            return AlertsView(alerts_of_frame(snap.read()), meta.get("base_run"),
                              meta.get("reason"), list(meta.get("delivery_lines", [])),
                              not_compared, compared, dict(meta.get("signals") or {}),
                              compared_on=meta.get("compared_on"),
                              core_prompts=tuple(sorted(
                                  compared_prompts(store, run_id, None)[0] or ())))
    return None


def _pairwise(store: Store, run_id: str, judged: Snapshot) -> Snapshot | None:
    """The run's pairwise snapshot over the essays the judge scored (as the stats stage
    pairs them)."""
    found = store.latest_ok_snapshot("pairwise", run_id)
    if found is None or found.upstream_snapshot_ids != judged.upstream_snapshot_ids:
        return None
    return found


def run_snapshots(store: Store, run_id: str) -> tuple[Snapshot, Snapshot]:
    """The run's judge snapshot (``find_judged``) and the essays it judged."""
    judged = find_judged(store, run_id)
    return judged, store.get_snapshot(judged.upstream_snapshot_ids[0])


def load_run(store: Store, run_id: str,
             found: tuple[Snapshot, Snapshot] | None = None) -> RunData:
    """Read everything the report of ``run_id`` shows (``found``: ``run_snapshots``'
    answer, when the caller has it)."""
    judged, essays_snap = found or run_snapshots(store, run_id)
    stage_runs = store.stage_runs(run_id, 1000)
    pairs = _pairwise(store, run_id, judged)
    stats, stats_note = _stats_tables(store, run_id, judged)
    alerts = _alerts(store, run_id, stage_runs, judged)
    health = run_health(store, run_id)
    notes = Notes(
        stats=stats_note,
        pairwise=None if pairs is not None else (
            f"pairwise was not run for run {run_id}: essaybench pairwise --run {run_id}, "
            f"then essaybench stats --run {run_id}"),
        alerts=None if alerts is not None else f"the alerts stage did not run for run {run_id}")
    snapshots = {"generate": essays_snap.snapshot_id, "judge": judged.snapshot_id,
                 **({"pairwise": pairs.snapshot_id} if pairs is not None else {})}
    return RunData(run_id=run_id, store_root=store.root, essays=essays_snap.read(),
                   judgments=judged.read(), pairwise=pairs.read() if pairs else None,
                   stats=stats, alerts=alerts, drift=run_drift(store, run_id),
                   health=health.summary() if health is not None else None,
                   stage_runs=stage_runs, snapshots=snapshots, notes=notes,
                   flagged_rule=flagged_rule_of(stage_runs))
