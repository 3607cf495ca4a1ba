"""Judge calibrations in the store, and the check that a run's judges have one.

A calibration is recorded by the stage run that made it — ``calibrate`` (``essaybench
calibrate``), or a run's ``drift`` stage when a judge is used for the first time or its
change is forced — in its catalog row: ``calibrations: {judge: identity}``; the anchor
judgments are its snapshot. A ``calibrate`` run also records, per judge, the identity it
succeeds and whether the new calibration agrees with that one within tolerance
(``continues``): identities linked that way stay comparable across weeks.

:func:`require_calibrated` is the pre-flight check of a run: a judge whose identity
differs from its last calibration (provider, model id, parameters, rubric, judge prompt or
anchor set changed) is refused unless forced; a judge never calibrated is calibrated by
the run itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from essaybench.bench.anchors import load_anchor_set
from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.drift import (
    COMPARABLE_VERDICTS,
    DriftParams,
    identity_changes,
    judge_identity,
)
from essaybench.bench.judge.request import JudgeParams, load_prompt_for, load_scoring
from essaybench.core.contracts import OK
from essaybench.core.errors import UserError
from essaybench.llm.registry import Registry
from essaybench.runs.lineage import lineage
from essaybench.store import Snapshot, Store
from essaybench.store.store import StageRun

CALIBRATING_STAGES = ("calibrate", "drift")
DRIFT = "drift"


class JudgeNotCalibrated(UserError, ValueError):
    """A judge changed since its calibration; the message says what and how to proceed."""


def judge_identities(judge: JudgeParams, drift: DriftParams,
                     registry: Registry) -> dict[str, dict[str, Any]]:
    """Each judge's identity (:func:`~essaybench.bench.drift.judge_identity`)."""
    scoring = load_scoring(judge)
    rubric = f"{scoring.id}.v{scoring.version}@{scoring.fingerprint}"
    judge_prompt = load_prompt_for(judge)
    prompt = None if judge_prompt is None else judge_prompt.fingerprint
    anchors = load_anchor_set(drift.anchor_set).label
    settings = {"mode": judge.mode, "temperature": judge.temperature,
                "max_tokens": judge.max_tokens, "analysis_max_chars": judge.analysis_max_chars}
    out = {}
    for name in judge.judges:
        spec = registry.get(name)
        # Not the base URL: the same model behind another address (a proxy, a new port)
        # is the same judge — and if it scores differently, the anchors will say so.
        endpoint = {"provider": spec.provider, "model_id": spec.model_id,
                    "default_params": dict(spec.default_params)}
        out[name] = judge_identity(name, endpoint, settings, rubric, prompt, anchors)
    return out


@dataclass(frozen=True)
class Calibration:
    judge: str
    identity: dict[str, Any]
    run_id: str
    stage: str
    snapshot: Snapshot


def calibrating_runs(store: Store) -> list[StageRun]:
    """Successful stage runs that recorded calibrations, newest first."""
    runs = [r for r in store.stage_runs(None, 100_000)
            if r.stage in CALIBRATING_STAGES and r.status == OK and r.snapshot_id
            and (r.meta or {}).get("calibrations")]
    return sorted(runs, key=lambda r: r.started_at, reverse=True)


def find_calibration(store: Store, judge: str, identity_id: str | None = None,
                     exclude_run: str | None = None,
                     runs: list[StageRun] | None = None) -> Calibration | None:
    """The newest calibration of ``judge`` (with that identity, when given); ``runs``:
    :func:`calibrating_runs` when the caller has read them already."""
    for run in calibrating_runs(store) if runs is None else runs:
        if run.run_id == exclude_run:
            continue
        ident = (run.meta or {})["calibrations"].get(judge)
        if ident is not None and (identity_id is None or ident["id"] == identity_id):
            assert run.snapshot_id is not None
            return Calibration(judge, ident, run.run_id, run.stage,
                               store.get_snapshot(run.snapshot_id))
    return None


def uncalibrated(store: Store, identities: dict[str, dict[str, Any]],
                 exclude_run: str | None = None) -> dict[str, list[str]]:
    """Judges whose identity has no calibration although an earlier one of theirs has:
    judge → what changed. (A judge with no calibration at all is not listed.)"""
    changed = {}
    runs = calibrating_runs(store)  # read once for every judge
    for judge, ident in identities.items():
        if find_calibration(store, judge, ident["id"], exclude_run, runs) is not None:
            continue
        last = find_calibration(store, judge, exclude_run=exclude_run, runs=runs)
        if last is not None:
            changed[judge] = identity_changes(last.identity, ident) or ["identity"]
    return changed


FORCE_FLAG = "--force-uncalibrated"  # essaybench run / rerun
FORCE_PARAMETER = "uncalibrated_ok"  # the pipeline flow's (a deployment's) parameter


def require_calibrated(store: Store, config: BenchmarkConfig, registry: Registry,
                       config_path: str, forced: bool, *,
                       force_with: str = f"pass {FORCE_FLAG}") -> None:
    """Refuse a run whose judge changed since its calibration, unless ``forced``;
    ``force_with`` says how to force it where the run was started (a CLI flag, a
    deployment's parameter)."""
    if config.drift is None or forced:
        return
    changed = uncalibrated(store, judge_identities(config.judge, config.drift, registry))
    if changed:
        what = "; ".join(f"judge {j}: {', '.join(c)}" for j, c in sorted(changed.items()))
        raise JudgeNotCalibrated(
            f"{what} — changed since its calibration on the anchor set, so its scores "
            f"would not be comparable with earlier weeks. Calibrate first: essaybench "
            f"calibrate --config {config_path} (or {force_with}: the run re-calibrates and "
            f"its cells are marked not comparable)")


def _newest_ok_meta(store: Store, run_id: str, stage: str) -> dict[str, Any] | None:
    for stage_run in store.stage_runs(run_id, 1000):  # newest first
        if stage_run.stage == stage and stage_run.status == OK:
            return stage_run.meta or {}
    return None


def stage_run_meta(store: Store, run_id: str, stage: str) -> dict[str, Any]:
    """What ``run_id``'s newest successful ``stage`` run recorded in its catalog row."""
    meta = _newest_ok_meta(store, run_id, stage)
    if meta is None:
        raise LookupError(f"run {run_id} has no successful {stage!r} stage in {store.root}")
    return meta


def run_drift(store: Store, run_id: str) -> dict[str, dict[str, Any]] | None:
    """Per judge, the drift verdict of ``run_id`` (or of the run it continues, for a
    rerun that did not judge): None when no drift stage ran."""
    for run in lineage(store, run_id):
        meta = _newest_ok_meta(store, run, DRIFT)
        if meta is not None:
            judges: dict[str, dict[str, Any]] = meta.get("judges", {})
            return judges
    return None


def _continues(store: Store) -> dict[str, str]:
    """identity id → the identity id it was calibrated to agree with."""
    links = {}
    for run in calibrating_runs(store):
        for judge, prev in ((run.meta or {}).get("continues") or {}).items():
            if prev:
                links[run.meta["calibrations"][judge]["id"]] = prev  # type: ignore[index]
    return links


def same_judge(store: Store, a: str | None, b: str | None) -> bool:
    """Whether identities ``a`` and ``b`` are one judge across weeks: equal, or linked by
    calibrations that agreed within tolerance."""
    if a is None or b is None:
        return a == b
    links = _continues(store)

    def root(x: str) -> str:
        seen = set()
        while x in links and x not in seen:
            seen.add(x)
            x = links[x]
        return x

    return root(a) == root(b)


def incomparable_judges(store: Store, now: dict[str, dict[str, Any]] | None,
                        before: dict[str, dict[str, Any]] | None,
                        only_before: bool = False) -> dict[str, str]:
    """Judges whose scores in two runs (their drift verdicts ``now``, ``before``; None: no
    drift stage ran) must not be compared: judge → why. ``only_before``: only the reasons
    that lie with the earlier run (another earlier run might do)."""
    out: dict[str, str] = {}
    for judge, v in (now or {}).items():
        if not only_before and v["verdict"] not in COMPARABLE_VERDICTS:
            out[judge] = f"{v['verdict']} in this run ({v['reason']})"
            continue
        b = (before or {}).get(judge)
        if b is None:
            continue
        if b["verdict"] in ("drifted", "unverified"):
            out[judge] = f"{b['verdict']} in the run compared with"
        elif not same_judge(store, v["identity"], b["identity"]):
            out[judge] = ("another identity in the run compared with (changed since, and "
                          "not calibrated to agree)")
    return out
