"""A run's health as its aggregate stage recorded it, and the verdict that fails a run.

The pipeline flow calls ``require_healthy`` after every snapshot and report is written:
a run below its coverage floor raises :class:`~essaybench.bench.health.RunUnhealthy`, so
the flow run ends Failed and the command line exits 1 with the explanation, while the
stage rows stay ``ok`` (they did their job; the run's result is what is wanted).
"""

from __future__ import annotations

from pathlib import Path

from essaybench.bench.health import RunHealth, RunUnhealthy, health_of_meta
from essaybench.core.settings import DEFAULT_BENCHMARK_CONFIG, DEFAULT_STORE_ROOT
from essaybench.store import Store

AGGREGATE = "aggregate"  # the stage whose catalog row carries the health (stages/aggregate.py)


def run_health(store: Store, run_id: str) -> RunHealth | None:
    """The health the newest successful aggregate of ``run_id`` recorded; None when there
    is none (no aggregate yet, or one from before health was recorded)."""
    for stage_run in store.stage_runs(run_id, 1000):  # newest first
        if stage_run.stage == AGGREGATE and stage_run.status == "ok":
            return health_of_meta(stage_run.meta)
    return None


def unless_default(given: str, default: str) -> str | None:
    """``given`` for the rerun command, or None when it is the default (left out)."""
    return None if Path(given).resolve() == Path(default).resolve() else given


def require_healthy(store: Store, run_id: str, config_path: str) -> RunHealth | None:
    """The run's health; raises ``RunUnhealthy`` (its explanation ends with the rerun
    command, naming ``config_path`` and the store unless they are the defaults) when a
    model × judge cell is below the floor."""
    health = run_health(store, run_id)
    if health is not None and not health.ok:
        raise RunUnhealthy(health, health.explain(
            unless_default(config_path, DEFAULT_BENCHMARK_CONFIG),
            unless_default(str(store.root), DEFAULT_STORE_ROOT)))
    return health
