"""Runs and their lineage, as the benchmark stages use them.

- ``run_scope``: the :class:`ReuseScope` of a run (recorded by ``record_run``): the
  calls its gateway session may serve instead of sending.
- ``lineage_upstream``: the snapshot a rerun of a stage reads, found along the chain of
  runs each rerun continues (a rerun of a rerun has no essays of its own).
- ``rerun_config``: a rerun from ``generate`` writes its base run's prompts (the prompt
  set version and the sample that run's generate stage used), not the config's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from essaybench.bench.config import BenchmarkConfig
from essaybench.core.errors import NotFoundError
from essaybench.llm.scope import ReuseScope
from essaybench.llm.session import GatewaySession
from essaybench.store import Snapshot, Store
from essaybench.store.runs import StageRunInputs, get_run, run_is_known, stage_run_inputs

SELECTION = ("prompt_set", "per_genre", "sample_seed")  # what picks a run's prompts


def run_scope(store: Store, run_id: str) -> ReuseScope:
    """The recorded scope of ``run_id``; a run never recorded (a stage called on its
    own) reuses only its own calls."""
    record = get_run(store, run_id)
    if record is None:
        return ReuseScope.of_run(run_id)
    return ReuseScope.of_run(run_id, record.reuse_scope, record.reuse_unattributed)


def check_session_run(session: GatewaySession, run_id: str) -> None:
    """A session scoped to one run records its calls under that run: refuse another's."""
    owner = session.scope.run_id
    if owner is not None and owner != run_id:
        raise ValueError(f"the gateway session belongs to run {owner}, not {run_id}")


def lineage(store: Store, run_id: str) -> Iterator[str]:
    """``run_id``, the run it continues, that run's, ... (ends at a new run)."""
    seen: set[str] = set()
    current: str | None = run_id
    while current is not None and current not in seen:
        seen.add(current)
        yield current
        record = get_run(store, current)
        current = record.base_run if record is not None else None


def _read_snapshot_ids(rows: list[StageRunInputs], stage: str) -> list[str]:
    """The ``stage`` snapshots these stage runs read (snapshot ids start with the stage)."""
    return [sid for row in rows for sid in row.upstream_snapshot_ids
            if sid.startswith(f"{stage}-")]


def lineage_upstream(store: Store, stage: str, upstream_stage: str, run_id: str) -> Snapshot:
    """The ``upstream_stage`` snapshot a rerun of ``stage`` from ``run_id`` reads: the
    run's own successful one; else the one the run's stages read (a rerun reads its base
    run's); else, when the run never ran ``upstream_stage``, its base run's, and so on.
    A ``LookupError`` naming the run and the stage when there is none."""
    runs = list(lineage(store, run_id))
    for run in runs:
        own = store.latest_ok_snapshot(upstream_stage, run)
        if own is not None:
            return own
        rows = stage_run_inputs(store, run_id=run)
        if any(r.stage == upstream_stage for r in rows):
            raise NotFoundError(
                f"cannot rerun {stage!r} from run {run}: its {upstream_stage!r} stage did not "
                f"succeed; rerun that first: essaybench rerun --run {run} --stage "
                f"{upstream_stage}")
        for snapshot_id in _read_snapshot_ids(rows, upstream_stage):
            snapshot = store.get_snapshot(snapshot_id)
            if snapshot.stage == upstream_stage:
                return snapshot
    if not run_is_known(store, run_id):
        raise NotFoundError(f"cannot rerun {stage!r}: no run {run_id!r} in {store.root}")
    chain = " ← ".join(runs)
    raise NotFoundError(f"cannot rerun {stage!r} from run {run_id}: no {upstream_stage!r} "
                      f"snapshot in it or the runs it continues ({chain})")


def generate_params(store: Store, run_id: str) -> dict[str, Any] | None:
    """The parameters of the generate stage that wrote ``run_id``'s essays, along its
    lineage (a killed run's generate stage recorded them when it started)."""
    for run in lineage(store, run_id):
        rows = stage_run_inputs(store, run_id=run)
        own = [r for r in rows if r.stage == "generate"]
        if own:
            return own[0].params
        for snapshot_id in _read_snapshot_ids(rows, "generate"):
            writers = [w for w in stage_run_inputs(store, snapshot_id=snapshot_id)
                       if w.stage == "generate"]
            if writers:
                return writers[0].params
    return None


def rerun_config(store: Store, run_id: str, config: BenchmarkConfig) -> BenchmarkConfig:
    """``config`` with the prompt selection of the run ``run_id`` reruns, when it is a
    rerun (the models and judges stay the config's); else ``config`` itself."""
    record = get_run(store, run_id)
    if record is None or record.base_run is None:
        return config
    params = generate_params(store, record.base_run)
    if params is None:
        raise NotFoundError(f"cannot rerun 'generate' from run {record.base_run}: it has no "
                          f"generate stage, nor have the runs it continues")
    return config.model_copy(update={k: params[k] for k in SELECTION if k in params})
