"""The last comparable run: what this week's alerts compare with.

A run is comparable with this one when it judged the same prompts (the same prompt-set
version, or at least one prompt in common), with the same judges under the same rubric
(id and fingerprint per judge), its own health was ok (coverage above its floor), and
none of its judges failed the anchor check (drifted or unverified) in it.
Runs in this run's reuse scope (the run a rerun continues, a ``--reuse-from`` run) are
not candidates: their answers are this run's answers. Newest first (by the start of
their judge stage); every run passed over is listed with why, so "no comparable run"
says which runs there were and what was different.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from essaybench.core.contracts import OK
from essaybench.runs.calibration import run_drift
from essaybench.runs.health import run_health
from essaybench.runs.lineage import run_scope
from essaybench.store import Snapshot, Store

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


def _judge_runs(store: Store) -> list[tuple[str, str, Snapshot]]:
    """(started_at, run, judge snapshot) of each run's newest ok judge stage run."""
    newest: dict[str, tuple[str, str]] = {}
    for sr in store.stage_runs(None, 100_000):
        if sr.stage == JUDGE and sr.status == OK and sr.snapshot_id is not None:
            when = sr.started_at.isoformat()
            if sr.run_id not in newest or when > newest[sr.run_id][0]:
                newest[sr.run_id] = (when, sr.snapshot_id)
    return sorted(((w, r, store.get_snapshot(s)) for r, (w, s) in newest.items()),
                  key=lambda t: (t[0], t[1]), reverse=True)


def last_comparable_run(store: Store, run_id: str, judged: Snapshot) -> Baseline:
    """The newest earlier run comparable with ``run_id``'s judge snapshot ``judged``."""
    judged.require_stage(JUDGE, "alerts")
    judged_now = judged.read()
    essays_now = store.get_snapshot(judged.upstream_snapshot_ids[0]).read()
    runs = _judge_runs(store)
    # Earlier than this run's judging — or, for a rerun from aggregate, than the judging
    # of the run that wrote ``judged``.
    mine = ([w for w, r, _ in runs if r == run_id]
            or [w for w, _, s in runs if s.snapshot_id == judged.snapshot_id])
    until = min(mine, default="")
    lineage = set(run_scope(store, run_id).runs or ()) | {run_id}
    skipped: list[tuple[str, str]] = []
    for when, other, snap in runs:
        if other in lineage or (mine and when >= until):
            continue
        health = run_health(store, other)
        if health is None:
            skipped.append((other, "no health recorded (no aggregate stage)"))
            continue
        if not health.ok:
            skipped.append((other, health.summary()))
            continue
        untrusted = sorted(j for j, v in (run_drift(store, other) or {}).items()
                           if v["verdict"] in UNTRUSTED)
        if untrusted:
            skipped.append((other, f"judge {', '.join(untrusted)} failed its anchor check "
                                   "in that run"))
            continue
        essays = store.get_snapshot(snap.upstream_snapshot_ids[0])
        why = incomparable(judged_now, essays_now, snap.read(), essays.read())
        if why is not None:
            skipped.append((other, why))
            continue
        return Baseline(other, snap, essays, None, tuple(skipped))
    if not skipped:
        return Baseline(None, None, None, "no earlier run with a judge stage")
    listed = "; ".join(f"{r}: {why}" for r, why in skipped[:MAX_LISTED])
    more = f"; {len(skipped) - MAX_LISTED} more" if len(skipped) > MAX_LISTED else ""
    return Baseline(None, None, None, f"{len(skipped)} earlier run(s), none comparable: "
                    f"{listed}{more}", tuple(skipped))
