"""The ``pipeline`` flow: curate → generate → judge → aggregate (→ pairwise) → stats.

The weekly run. ``from_stage`` restarts a run at generate, judge or aggregate from
``base_run``'s snapshots; the ledger serves every call that already succeeded. Pairwise
judging runs when the benchmark config has a ``pairwise:`` section; the stats stage
(bootstrap CIs, rankings, bias monitors) always ends the run.

The stages run as tasks of this flow, not as their own subflows: a subflow costs a
flow run and a parent task run (API round trips, ~0.3 s each on a busy 2-core host) for
nothing the catalog does not already record. Generate and judge share one task (and one
gateway session, so the judge calls sent while generating reach the judge stage in
memory); each stage still writes its own snapshot and catalog row. Each stage's flow
(``flows/<stage>.py``) wraps the same task for running it on its own.
"""

from __future__ import annotations

from typing import Any

from prefect import flow

from essaybench.bench.config import load_benchmark_config
from essaybench.core.settings import (
    DEFAULT_BENCHMARK_CONFIG,
    DEFAULT_CURATE_CONFIG,
    DEFAULT_STORE_ROOT,
)
from essaybench.stages.pipeline import BENCHMARK_STAGES, LLM_STAGES, resolve_upstream
from essaybench.store import Store
from essaybench.store.store import new_run_id
from flows.curate import curate_flow
from tasks.benchmark import benchmark_stages_task
from tasks.pairwise import pairwise_stage_task
from tasks.stats import stats_stage_task


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
    # Generate and judge run in one task, sharing a gateway session: each essay is judged
    # as soon as it is written. Aggregate is a task of its own.
    llm = [s for s in stages if s in LLM_STAGES]
    if llm:
        result.update(benchmark_stages_task("+".join(llm), run_id, benchmark_config,
                                            store_root, snapshot_id))
        snapshot_id = result[llm[-1]]
    result.update(benchmark_stages_task("aggregate", run_id, benchmark_config, store_root,
                                        snapshot_id))
    store = Store(store_root)
    # Pairwise judging (when configured) and the statistics read what aggregate read.
    judged = (store.get_snapshot(result["judge"]) if "judge" in result
              else store.lineage(result["aggregate"])["judge"])
    essays_id = judged.upstream_snapshot_ids[0]
    if load_benchmark_config(benchmark_config).pairwise is not None:
        result["pairwise"] = pairwise_stage_task(run_id, benchmark_config, store_root,
                                                 essays_id, None)
    result["stats"] = stats_stage_task(run_id, benchmark_config, store_root, run_id,
                                       judged.snapshot_id, result.get("pairwise"))
    result["reports"] = str(store.root / "reports" / run_id)
    return result
