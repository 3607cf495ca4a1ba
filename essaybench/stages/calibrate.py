"""The ``calibrate`` stage: the config's judges score the anchor set, and those scores
become each judge's reference (``essaybench calibrate``).

Run it after changing a judge (model, endpoint, parameters, rubric or judge prompt): a
run refuses a changed judge until it is calibrated (``runs/calibration.py``). Each judge
is also compared with its previous calibration: when the new one agrees within the drift
tolerance (same verdict rules as the weekly check), the catalog row records that it
``continues`` the previous identity, and runs on either side stay comparable; otherwise
the change starts a new series (earlier weeks are not compared with later ones).
"""

from __future__ import annotations

from typing import Any

from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.drift import assess_drift, first_calibration, identity_changes
from essaybench.bench.judge.request import Runner
from essaybench.core.contracts import StageOutput
from essaybench.llm.registry import Registry, load_registry
from essaybench.llm.session import open_gateway
from essaybench.runs.calibration import find_calibration, judge_identities, stage_run_meta
from essaybench.runs.lineage import run_scope
from essaybench.stages.drift import judge_anchors
from essaybench.store import Snapshot, Store
from essaybench.store.run_stage import run_stage

STAGE = "calibrate"


def calibrate_stage(store: Store, run_id: str, config: BenchmarkConfig, registry: Registry,
                    session: Runner) -> Snapshot:
    params = config.drift
    if params is None:
        raise ValueError("the benchmark config turns drift off (drift: null): there is "
                         "nothing to calibrate against")
    identities = judge_identities(config.judge, params, registry)

    def compute() -> StageOutput:
        table = judge_anchors(params, config.judge, session, STAGE)
        judges: dict[str, dict[str, Any]] = {}
        continues: dict[str, str | None] = {}
        for judge, ident in identities.items():
            before = find_calibration(store, judge, exclude_run=run_id)
            if before is None:
                drift = first_calibration(judge, table, params, None)
                continues[judge] = None
                changes: list[str] = []
            else:
                drift = assess_drift(judge, table, before.snapshot.read(), params)
                continues[judge] = (before.identity["id"] if drift.verdict == "stable"
                                    else None)
                changes = identity_changes(before.identity, ident)
            judges[judge] = {**drift.as_dict(), "identity": ident["id"], "changes": changes,
                             "previous": before.identity["id"] if before else None,
                             "reference_run": before.run_id if before else None}
        anchor_set = next(iter(identities.values()))["anchor_set"]
        # The comparison is this run's (its catalog row), not the shared snapshot's.
        return StageOutput(table, meta={"anchor_set": anchor_set}, run_meta={
            "anchor_set": anchor_set, "judges": judges, "calibrations": identities,
            "continues": continues})

    return run_stage(store, run_id=run_id, stage=STAGE, upstream=[], params=params,
                     rows_in=None, compute=compute)


def calibrate(store: Store, run_id: str, config: BenchmarkConfig
              ) -> tuple[Snapshot, dict[str, Any]]:
    """Open a gateway session for the config's judges and run the stage (fresh calls: a
    calibration re-uses nothing from other runs); the snapshot and what the stage run
    recorded (per judge: verdict against the previous calibration, ``continues``)."""
    registry = load_registry()
    with open_gateway(registry, store.root, config.judge.judges, log_dir=store.root / "logs",
                      scope=run_scope(store, run_id),
                      ledger_lock_timeout_s=store.lock_timeout_s) as session:
        snapshot = calibrate_stage(store, run_id, config, registry, session)
    return snapshot, stage_run_meta(store, run_id, STAGE)


def calibration_lines(meta: dict[str, Any]) -> list[str]:
    """What ``essaybench calibrate`` prints per judge."""
    lines = []
    for judge, v in meta["judges"].items():
        if v["previous"] is None:
            lines.append(f"judge {judge}: calibrated ({v['reason']})")
            continue
        change = "; ".join(v["changes"]) or "no change"
        agreed = meta["continues"].get(judge) is not None
        lines.append(f"judge {judge}: re-calibrated ({change}); against the previous "
                     f"calibration: {v['verdict']} — {v['reason']}; "
                     + ("comparable with earlier weeks" if agreed else
                        "NOT comparable with earlier weeks (a new series starts)"))
    return lines
