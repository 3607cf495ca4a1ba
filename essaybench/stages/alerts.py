"""The ``alerts`` stage: this run against the last comparable run, and who is told.

Reads the run's ``judge`` snapshot (and the essays it judged), finds the last comparable
run (``runs/comparable.py``), computes the alerts (``bench/alerts.py``), POSTs them to
the config's webhooks when there are any, and writes an ``alerts`` snapshot (one row per
alert; upstream: both runs' judge snapshots) whose meta and catalog row record the run
compared with — or why there was none — and each webhook's delivery. The report
``<store>/reports/<run>/alerts.md`` is what the pipeline publishes as a Prefect
artifact. No comparable run is a result ("no comparable run (why)"), not an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from essaybench.bench.alerts import (
    ALL_MODELS,
    Alert,
    AlertParams,
    alert_lines,
    alerts_frame,
    alerts_markdown,
    alerts_of_frame,
    compute_alerts,
    judge_alerts,
    shown_url,
)
from essaybench.bench.flagged_rule import DEFAULT_FLAGGED_RULE, FlaggedRule
from essaybench.core.contracts import OK, StageOutput
from essaybench.core.errors import NotFoundError
from essaybench.runs.calibration import incomparable_judges, run_drift
from essaybench.runs.comparable import last_comparable_run
from essaybench.runs.health import run_health
from essaybench.runs.rotation import compared_prompts
from essaybench.runs.webhooks import deliver
from essaybench.stages.alerts_signals import signals
from essaybench.store import Snapshot, Store
from essaybench.store.run_stage import run_stage

STAGE = "alerts"


@dataclass(frozen=True)
class RunAlerts:
    """A run's alerts as its alerts stage recorded them."""

    run_id: str
    snapshot: Snapshot
    alerts: list[Alert]
    base_run: str | None
    reason: str | None  # why there was no comparable run
    deliveries: list[str]  # one line per webhook
    report: Path
    compared_on: str | None = None  # with rotation: which prompts were compared

    def lines(self) -> list[str]:
        """What the terminal shows: the alerts, then each webhook's delivery."""
        return [*alert_lines(self.alerts, self.run_id, self.base_run, self.reason),
                *([f"  {self.compared_on}"] if self.compared_on else []),
                *(f"  webhook {d}" for d in self.deliveries)]

    def markdown(self) -> str:
        return alerts_markdown(self.alerts, self.run_id, self.base_run, self.reason,
                               self.deliveries)


def health_alerts(store: Store, run_id: str) -> list[Alert]:
    """A run below its coverage floor, as an alert (the run then fails)."""
    health = run_health(store, run_id)
    if health is None or health.ok:
        return []
    return [Alert(ALL_MODELS, None, "run_unhealthy", "critical", None, None, None,
                  f"run {run_id} failed: {health.summary()}")]


def payload(run_id: str, base_run: str | None, alerts: list[Alert]) -> dict[str, Any]:
    """The JSON a webhook receives; ``text`` makes it readable by chat webhooks as is."""
    return {"run_id": run_id, "base_run": base_run, "n_alerts": len(alerts),
            "text": "\n".join(alert_lines(alerts, run_id, base_run, None)),
            "alerts": alerts_frame(alerts).to_dicts()}


def alerts_stage(store: Store, run_id: str, params: AlertParams,
                 judged: Snapshot, flagged: FlaggedRule = DEFAULT_FLAGGED_RULE) -> RunAlerts:
    """Run the stage over ``run_id``'s judge snapshot ``judged``; both runs' flagged
    judgments count by ``flagged`` (the run's ``flagged_essays`` rule), as on the
    leaderboard."""
    judged.require_stage("judge", STAGE)
    baseline = last_comparable_run(store, run_id, judged)
    report = store.root / "reports" / run_id / "alerts.md"
    upstream = [judged, *([baseline.judged] if baseline.judged is not None else [])]

    def compute() -> StageOutput:
        drift_now = run_drift(store, run_id)
        alerts: list[Alert] = [*judge_alerts(drift_now or {}), *health_alerts(store, run_id)]
        signal_alerts, signals_meta = signals(  # judge-free: drift and relevance
            store, store.get_snapshot(judged.upstream_snapshot_ids[0]).read(),
            baseline.run_id, baseline.essays, params.signals, run_id)
        alerts += signal_alerts
        not_compared: dict[str, str] = {}
        core, compared_on = compared_prompts(store, run_id, baseline.run_id)
        if baseline.judged is not None and baseline.essays is not None \
                and core != set():  # a new core with none in common: nothing to compare
            assert baseline.run_id is not None
            not_compared = incomparable_judges(store, drift_now,
                                               run_drift(store, baseline.run_id))
            keep = ~pl.col("judge").is_in(list(not_compared))
            frames = [store.get_snapshot(judged.upstream_snapshot_ids[0]).read(),
                      baseline.essays.read(), judged.read().filter(keep),
                      baseline.judged.read().filter(keep)]
            if core is not None:  # rotation: week over week on the core only
                frames = [f.filter(pl.col("prompt_id").is_in(sorted(core))) for f in frames]
            alerts += compute_alerts(frames[0], frames[1], frames[2], frames[3], params,
                                     flagged)
        sent = (deliver(params.webhooks, payload(run_id, baseline.run_id, alerts),
                        params.webhook_timeout_s) if alerts else [])
        meta: dict[str, Any] = {
            "base_run": baseline.run_id, "reason": baseline.reason,
            "skipped": [list(s) for s in baseline.skipped], "n_alerts": len(alerts),
            "judges_not_compared": not_compared, "flagged_essays": flagged,
            "signals": signals_meta,
            "compared_on": compared_on,
            "deliveries": [{"url": d.url, "delivered": d.delivered,
                            "status_code": d.status_code, "error": d.error,
                            "seconds": d.seconds} for d in sent],
            "delivery_lines": [d.line() for d in sent]}
        report.parent.mkdir(parents=True, exist_ok=True)
        text = alerts_markdown(alerts, run_id, baseline.run_id, baseline.reason,
                               meta["delivery_lines"])
        report.write_text(text + (f"\n{compared_on}\n" if compared_on else ""),
                          encoding="utf-8")
        return StageOutput(alerts_frame(alerts), meta, run_meta=meta)

    # The catalog records the parameters: webhook URLs only as scheme and host.
    recorded = {**params.model_copy(update={"webhooks": tuple(map(shown_url, params.webhooks))}
                                    ).model_dump(mode="json"), "flagged_essays": flagged}
    snapshot = run_stage(store, run_id=run_id, stage=STAGE, upstream=upstream,
                         params=recorded, rows_in=None, compute=compute)
    return run_alerts(store, run_id, snapshot)


def run_alerts(store: Store, run_id: str, snapshot: Snapshot | None = None) -> RunAlerts:
    """``run_id``'s alerts as its newest successful alerts stage recorded them (what
    was compared and delivered comes from the stage run's catalog row: two runs may
    share a snapshot); LookupError when it has none."""
    for stage_run in store.stage_runs(run_id, 1000):  # newest first
        if stage_run.stage == STAGE and stage_run.status == OK and stage_run.snapshot_id:
            if snapshot is not None and stage_run.snapshot_id != snapshot.snapshot_id:
                continue
            snap = snapshot or store.get_snapshot(stage_run.snapshot_id)
            meta = stage_run.meta or {}
            return RunAlerts(run_id, snap, alerts_of_frame(snap.read()), meta.get("base_run"),
                             meta.get("reason"), list(meta.get("delivery_lines", [])),
                             store.root / "reports" / run_id / "alerts.md",
                             meta.get("compared_on"))
    raise NotFoundError(f"run {run_id} has no alerts stage in {store.root} (it ends the "
                      "pipeline of runs made since alerts were added)")
