"""The last comparable run: what this week's alerts compare with.

A run is comparable with this one when it judged the same prompts (the same prompt-set
version, or at least one prompt in common), with the same judges under the same rubric
(id and fingerprint per judge), its own health was ok (coverage above its floor), and
none of its judges failed the anchor check (drifted or unverified) in it.
A rerun's baseline is its original run's (the run at the end of the chain of runs it
continues): only runs that started before the original are candidates, so a rerun of
week 3 is never compared with week 8, nor with another rerun of week 3 (served from the
same ledger rows). Runs in this run's reuse scope (a ``--reuse-from`` run) are not
candidates either: their answers are this run's answers. Newest first (by the start of
their judge stage); every run passed over is listed with why, so "no comparable run"
says which runs there were and what was different.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import polars as pl

from essaybench.core.contracts import OK
from essaybench.runs.calibration import run_drift
from essaybench.runs.health import run_health
from essaybench.runs.lineage import run_scope
from essaybench.store import Snapshot, Store
from essaybench.store.runs import get_runs

JUDGE = "judge"
MAX_LISTED = 5  # runs passed over named in the reason
UNTRUSTED = ("drifted", "unverified")  # a judge verdict that disqualifies a baseline


@dataclass(frozen=True)
class Baseline:
    """The comparable run chosen (``run_id`` None: none, and ``reason`` says why)."""

    run_id: str | None
    judged: Snapshot | None
    essays: Snapshot | None
    reason: str | None
    skipped: tuple[tuple[str, str], ...] = ()  # (run, why not comparable), newest first
    original: str | None = None  # for a rerun, its original run (whose baseline this is)

    def line(self, run_id: str) -> str:
        """Which run was chosen and why (or why none), one line."""
        rerun = (f" (the baseline of {self.original}, the run {run_id} reruns)"
                 if self.original is not None else "")
        if self.run_id is None:
            return f"baseline: none{rerun}: {self.reason}"
        passed = (f"; passed over {len(self.skipped)}: "
                  + "; ".join(f"{r}: {why}" for r, why in self.skipped[:MAX_LISTED])
                  if self.skipped else "")
        return (f"baseline: {self.run_id}{rerun}, the newest earlier run with the same "
                f"judges and rubric, prompts in common, healthy coverage and trusted "
                f"judges{passed}")


def _rubrics(judged: pl.DataFrame) -> dict[str, tuple[str, ...]]:
    """Per judge, the rubric ids and fingerprints its rows carry."""
    out: dict[str, set[str]] = {}
    for judge, rid, fp in judged.select("judge", "rubric_id", "rubric_fingerprint").unique() \
            .iter_rows():
        out.setdefault(str(judge), set()).add(f"{rid}@{fp}")
    return {j: tuple(sorted(v)) for j, v in out.items()}


def _versions(essays: pl.DataFrame) -> set[str]:
    return {str(v) for v in essays["prompt_set_version"].drop_nulls().to_list()}


def incomparable(judged_now: pl.DataFrame, essays_now: pl.DataFrame,
                 judged_before: pl.DataFrame, essays_before: pl.DataFrame) -> str | None:
    """Why ``before`` cannot be compared with ``now`` (None: it can). Pure."""
    r_now, r_before = _rubrics(judged_now), _rubrics(judged_before)
    if set(r_now) != set(r_before):
        return f"other judges ({', '.join(sorted(r_before)) or 'none'})"
    changed = sorted(j for j in r_now if r_now[j] != r_before[j])
    if changed:
        j = changed[0]
        return f"other rubric for {j} ({', '.join(r_before[j])}, now {', '.join(r_now[j])})"
    if _versions(essays_now) & _versions(essays_before):
        return None
    common = set(judged_now["prompt_id"].to_list()) & set(judged_before["prompt_id"].to_list())
    if not common:
        return (f"no prompt in common (prompt set {', '.join(sorted(_versions(essays_before)))}"
                f", now {', '.join(sorted(_versions(essays_now)))})")
    return None


@dataclass(frozen=True)
class _History:
    """Each run's newest ok judge snapshot, the run each run continues and when it
    started (its first stage run), from one pass over the catalog."""

    judged: dict[str, tuple[datetime, str]]  # run -> (judge stage start, snapshot id)
    started: dict[str, datetime]
    base: dict[str, str]  # rerun -> the run it continues

    def original(self, run_id: str) -> str:
        """The run ``run_id`` continues, that run's, ... to the first (itself if none)."""
        seen = {run_id}
        while run_id in self.base and self.base[run_id] not in seen:
            run_id = self.base[run_id]
            seen.add(run_id)
        return run_id

    def week(self, run_id: str) -> datetime | None:
        """When ``run_id``'s original run started (a rerun belongs to its original's week)."""
        return self.started.get(self.original(run_id))


def _history(store: Store) -> _History:
    judged: dict[str, tuple[datetime, str]] = {}
    started: dict[str, datetime] = {}
    for sr in store.stage_runs(None, 100_000):
        if sr.run_id not in started or sr.started_at < started[sr.run_id]:
            started[sr.run_id] = sr.started_at
        if sr.stage == JUDGE and sr.status == OK and sr.snapshot_id is not None \
                and (sr.run_id not in judged or sr.started_at > judged[sr.run_id][0]):
            judged[sr.run_id] = (sr.started_at, sr.snapshot_id)
    records = get_runs(store, sorted(started))
    return _History(judged, started,
                    {r: rec.base_run for r, rec in records.items() if rec.base_run})


def why_not_baseline(store: Store, other: str, judged_now: pl.DataFrame,
                     essays_now: pl.DataFrame, snap: Snapshot) -> str | None:
    """Why run ``other`` (its judge snapshot ``snap``) is no baseline for the judgments
    ``judged_now`` of the essays ``essays_now`` (None: it is one)."""
    health = run_health(store, other)
    if health is None:
        return "no health recorded (no aggregate stage)"
    if not health.ok:
        return health.summary()
    untrusted = sorted(j for j, v in (run_drift(store, other) or {}).items()
                       if v["verdict"] in UNTRUSTED)
    if untrusted:
        return f"judge {', '.join(untrusted)} failed its anchor check in that run"
    essays = store.get_snapshot(snap.upstream_snapshot_ids[0])
    return incomparable(judged_now, essays_now, snap.read(), essays.read())


def last_comparable_run(store: Store, run_id: str, judged: Snapshot) -> Baseline:
    """The newest run comparable with ``run_id``'s judge snapshot ``judged`` that started
    before ``run_id`` — before its original run, when ``run_id`` is a rerun. Runs are
    dated by their original run (a rerun of week 3 is week 3, whenever it ran); within
    one week, the newest judging first."""
    judged.require_stage(JUDGE, "alerts")
    return last_comparable_of(store, run_id, judged.read(),
                              store.get_snapshot(judged.upstream_snapshot_ids[0]).read(),
                              judged.snapshot_id)


def last_comparable_of(store: Store, run_id: str, judged_now: pl.DataFrame,
                       essays_now: pl.DataFrame, snapshot_id: str | None = None) -> Baseline:
    """:func:`last_comparable_run` for judgments not (yet) in a snapshot (an adaptive run
    looks for its baseline after its first round: ``stages/adaptive.py``);
    ``snapshot_id``: the judge snapshot they are, if any (dates a run never recorded)."""
    history = _history(store)
    original = history.original(run_id)
    # Judgments no recorded run wrote (a stage called on its own): the judging that
    # wrote them dates them.
    until = history.week(run_id) or min(
        (w for w, s in history.judged.values() if s == snapshot_id), default=None)
    family = set(run_scope(store, run_id).runs or ()) | {run_id, original}
    rerun_of = original if original != run_id else None
    runs = sorted(((history.week(r) or w, w, r, s) for r, (w, s) in history.judged.items()),
                  reverse=True)
    skipped: list[tuple[str, str]] = []
    for week, _, other, snapshot_id in runs:
        if other in family or history.original(other) == original \
                or (until is not None and week >= until):
            continue  # this run, what it continues or reuses, a sibling rerun, later runs
        snap = store.get_snapshot(snapshot_id)
        why = why_not_baseline(store, other, judged_now, essays_now, snap)
        if why is not None:
            skipped.append((other, why))
            continue
        essays = store.get_snapshot(snap.upstream_snapshot_ids[0])
        return Baseline(other, snap, essays, None, tuple(skipped), rerun_of)
    if not skipped:
        return Baseline(None, None, None, "no earlier run with a judge stage", (),
                        rerun_of)
    listed = "; ".join(f"{r}: {why}" for r, why in skipped[:MAX_LISTED])
    more = f"; {len(skipped) - MAX_LISTED} more" if len(skipped) > MAX_LISTED else ""
    return Baseline(None, None, None, f"{len(skipped)} earlier run(s), none comparable: "
                    f"{listed}{more}", tuple(skipped), rerun_of)
