"""The ``drift`` stage: every judge re-scores the frozen anchor set; is it still the judge
it was when calibrated?

Runs after ``judge`` in the same gateway session (fresh calls each run, like the run's
own). Per judge, against the calibration of its identity (``runs/calibration.py``): a
verdict — ``stable``, ``drifted``, ``unverified`` (too few anchors scored), or, when this
run's scores become the reference, ``calibrated`` (first use) or ``recalibrated`` (a change
forced through). The snapshot holds the anchor judgments (judge-stage rows, prompt_id =
anchor id, plus ``level`` and the judge's ``identity``); the catalog row holds the
verdicts (``judges``) and any calibration made (``calibrations``). Alerts read them: a
judge that is not ``stable``/``calibrated`` raises an alert and its cells are not compared
with earlier weeks.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from essaybench.bench.anchors import anchor_essays, load_anchor_set, sample_anchors
from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.drift import DriftParams, JudgeDrift, assess_drift, first_calibration
from essaybench.bench.judge.judgments import judgments_table
from essaybench.bench.judge.request import JudgeParams, Runner, build_judge_requests, load_scoring
from essaybench.core.contracts import StageOutput
from essaybench.llm.registry import Registry
from essaybench.llm.types import ChatRequest
from essaybench.runs.calibration import (
    JudgeNotCalibrated,
    calibrating_runs,
    find_calibration,
    judge_identities,
    uncalibrated,
)
from essaybench.store import Snapshot, Store
from essaybench.store.run_stage import run_stage

STAGE = "drift"


def anchor_requests(params: DriftParams, judge: JudgeParams, stage: str = STAGE
                    ) -> tuple[pl.DataFrame, list[ChatRequest]]:
    """The (sampled) anchor essays and their judge calls, accounted under ``stage``: one
    per anchor and judge. The generate stage may send them early (``JudgePrefetch``'s
    ``early``); the drift stage then finds their results held by the gateway."""
    judge = judge.model_copy(update={"repeats": 1})
    essays = anchor_essays(sample_anchors(load_anchor_set(params.anchor_set), params.anchors,
                                          params.seed))
    return essays, [r.model_copy(update={"stage": stage})
                    for r in build_judge_requests(essays, judge, load_scoring(judge))]


def judge_anchors(params: DriftParams, judge: JudgeParams, session: Runner,
                  stage: str) -> pl.DataFrame:
    """The judges' judgments of the (sampled) anchor set: judge-stage rows plus ``level``.
    The calls are the judge stage's own (same rendering, schema and parameters),
    accounted under ``stage`` — one per anchor and judge, whatever ``judge.repeats`` says:
    the anchors measure the judge's single call, as its calibration did."""
    judge = judge.model_copy(update={"repeats": 1})
    essays, requests = anchor_requests(params, judge, stage)
    scoring = load_scoring(judge)
    results = session.run(requests)
    table = judgments_table(essays, requests, results, scoring, judge)
    return table.join(essays.select("prompt_id", "level"), on="prompt_id", how="left")


def _verdicts(store: Store, run_id: str, table: pl.DataFrame, params: DriftParams,
              identities: dict[str, dict[str, Any]], forced: bool
              ) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Per judge, its verdict (with identity and reference run); and the calibrations
    this run makes."""
    changed = uncalibrated(store, identities, exclude_run=run_id)
    runs = calibrating_runs(store)
    if changed and not forced:  # the pre-flight check refuses this before any call
        raise JudgeNotCalibrated("; ".join(f"judge {j} changed since its calibration: "
                                           f"{', '.join(c)}" for j, c in changed.items()))
    verdicts: dict[str, dict[str, Any]] = {}
    calibrations: dict[str, dict[str, Any]] = {}
    for judge, ident in identities.items():
        reference = find_calibration(store, judge, ident["id"], exclude_run=run_id, runs=runs)
        drift: JudgeDrift
        if reference is not None:
            drift = assess_drift(judge, table, reference.snapshot.read(), params)
        else:
            drift = first_calibration(judge, table, params, changed.get(judge))
            calibrations[judge] = ident
        verdicts[judge] = {**drift.as_dict(), "identity": ident["id"],
                           "reference_run": reference.run_id if reference else None}
    return verdicts, calibrations


def drift_stage(store: Store, run_id: str, config: BenchmarkConfig, registry: Registry,
                session: Runner, upstream: Snapshot, forced: bool = False) -> Snapshot:
    """Re-judge the anchors with every judge of ``config`` and record the verdicts.
    ``upstream``: the run's judge snapshot (lineage only: the anchors are not its rows)."""
    params = config.drift
    if params is None:
        raise ValueError("the benchmark config turns drift off (drift: null)")
    identities = judge_identities(config.judge, params, registry)

    def compute() -> StageOutput:
        table = judge_anchors(params, config.judge, session, STAGE)
        verdicts, calibrations = _verdicts(store, run_id, table, params, identities, forced)
        table = table.with_columns(pl.col("judge").replace_strict(
            {j: i["id"] for j, i in identities.items()}, return_dtype=pl.Utf8)
            .alias("identity"))
        anchor_set = next(iter(identities.values()))["anchor_set"]
        # The verdicts are this run's (its catalog row): the snapshot is content-addressed
        # and shared by runs whose anchor judgments are identical.
        return StageOutput(table, meta={"anchor_set": anchor_set}, run_meta={
            "anchor_set": anchor_set, "judges": verdicts, "calibrations": calibrations})

    return run_stage(store, run_id=run_id, stage=STAGE, upstream=[upstream], params=params,
                     rows_in=None, compute=compute)


def drift_lines(verdicts: dict[str, dict[str, Any]]) -> list[str]:
    """One line per judge, as the terminal shows it."""
    return [f"drift: judge {j}: {v['verdict']} — {v['reason']}" for j, v in verdicts.items()]
