"""The ``pipeline`` flow: curate → generate → judge → aggregate (→ pairwise) → stats.

The weekly run. ``from_stage`` restarts a run at generate, judge or aggregate from
``base_run``'s snapshots; the ledger serves every call that already succeeded. Pairwise
judging runs when the benchmark config has a ``pairwise:`` section; the stats stage
(bootstrap CIs, rankings, bias monitors) always ends the run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect import flow

from essaybench.benchmark import BENCHMARK_STAGES, load_benchmark_config, resolve_upstream
from essaybench.settings import (
    DEFAULT_BENCHMARK_CONFIG,
    DEFAULT_CURATE_CONFIG,
    DEFAULT_STORE_ROOT,
)
from essaybench.store import Store
from essaybench.store.store import new_run_id
from flows.aggregate import aggregate_flow
from flows.curate import curate_flow
from flows.generate import generate_flow
from flows.judge import judge_flow
from flows.pairwise import pairwise_flow
from flows.stats import stats_flow

STAGE_FLOWS: dict[str, Callable[..., str]] = {
    "generate": generate_flow, "judge": judge_flow, "aggregate": aggregate_flow}


@flow(name="pipeline")
def pipeline_flow(
    benchmark_config: str = DEFAULT_BENCHMARK_CONFIG,
    curate_config: str = DEFAULT_CURATE_CONFIG,
    store_root: str = DEFAULT_STORE_ROOT,
    curate: bool = True,
    from_stage: str = "generate",
    base_run: str | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    if from_stage != "generate" and base_run is None:
        raise ValueError(f"starting at {from_stage!r} needs base_run: the run whose "
                         "upstream snapshot it reads")
    run_id = run_id or new_run_id()
    result: dict[str, Any] = {"run_id": run_id}
    if curate and from_stage == "generate" and base_run is None:
        result["curate"] = curate_flow(curate_config, store_root, run_id=run_id)
    upstream = (resolve_upstream(Store(store_root), from_stage, base_run)
                if base_run is not None else None)
    snapshot_id = upstream.snapshot_id if upstream else None
    stages = BENCHMARK_STAGES[BENCHMARK_STAGES.index(from_stage):]
    for stage in stages:
        if stage == "generate":
            # The judge stage runs next: judge each essay as soon as it is written.
            snapshot_id = generate_flow(benchmark_config, store_root, run_id, snapshot_id,
                                        prefetch_judge="judge" in stages)
        else:
            snapshot_id = STAGE_FLOWS[stage](benchmark_config, store_root, run_id, snapshot_id)
        result[stage] = snapshot_id
    store = Store(store_root)
    # Pairwise judging (when configured) and the statistics read what aggregate read.
    judged = store.lineage(result["aggregate"])["judge"]
    essays_id = judged.upstream_snapshot_ids[0]
    if load_benchmark_config(benchmark_config).pairwise is not None:
        result["pairwise"] = pairwise_flow(benchmark_config, store_root, run_id, essays_id)
    result["stats"] = stats_flow(run_id, benchmark_config, store_root, run_id,
                                 judged.snapshot_id, result.get("pairwise"))
    result["reports"] = str(store.root / "reports" / run_id)
    return result
