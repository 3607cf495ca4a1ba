"""The ``pipeline`` flow: curate → generate → judge (→ drift) → aggregate (→ pairwise) → stats
→ alerts → report (→ publish).

The weekly run. A new run sends every LLM call afresh (``reuse_from`` names a run whose
successful calls it may be served instead); ``from_stage`` with ``base_run`` is a rerun:
it restarts at generate, judge or aggregate from ``base_run``'s snapshots (along its
lineage), and the ledger serves every call ``base_run`` and the runs it continues already
paid for. The run is recorded in the catalog's ``runs`` table; the flow run is named
after the run id and tagged with it. Pairwise
judging runs when the benchmark config has a ``pairwise:`` section; the stats stage
(bootstrap CIs, rankings, bias monitors) follows, then the alerts stage: this run against
the last comparable run, told to the log, a Markdown artifact and the config's webhooks.
Before any call the run checks that every judge is calibrated against the anchor set in
its current form (``uncalibrated_ok`` forces a changed judge through: it re-calibrates and
its cells are not compared with earlier weeks); the drift stage re-scores the anchors.
With a publish target (``publish_to``, ``essaybench run --publish URL``, or
$ESSAYBENCH_PUBLISH_URL where the flow runs) the run ends as ``essaybench store publish``
would after it: a failed run is published too, and a publish that fails fails the flow
(``essaybench.runs.publish``).

The stages run as tasks of this flow, not as their own subflows: a subflow costs a
flow run and a parent task run (API round trips, ~0.3 s each on a busy 2-core host) for
nothing the catalog does not already record. Generate and judge share one task (and one
gateway session, so the judge calls sent while generating reach the judge stage in
memory); each stage still writes its own snapshot and catalog row. Each stage's flow
(``flows/<stage>.py``) wraps the same task for running it on its own.
"""

from __future__ import annotations

from typing import Any, cast

from prefect import flow, get_run_logger
from prefect.client.orchestration import get_client
from prefect.context import FlowRunContext
from prefect.states import Failed

from essaybench.bench.config import BenchmarkConfig, load_benchmark_config
from essaybench.bench.generate import language_summary
from essaybench.bench.health import RunUnhealthy
from essaybench.bench.sharding import ShardingParams
from essaybench.core.activity import doing
from essaybench.core.errors import UserError, user_error_of
from essaybench.core.gcfreeze import frozen_heap
from essaybench.core.settings import (
    DEFAULT_BENCHMARK_CONFIG,
    DEFAULT_CURATE_CONFIG,
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_STORE_ROOT,
)
from essaybench.flows._fanout import run_shards
from essaybench.flows.batch_wait import batch_waiting, curated_already, suspend_for_batches
from essaybench.flows.curate import curate_flow
from essaybench.llm.batch.route import refuse_in_shards
from essaybench.llm.registry import load_registry
from essaybench.runs.calibration import FORCE_FLAG, FORCE_PARAMETER, require_calibrated
from essaybench.runs.estimate import require_within_budget
from essaybench.runs.health import require_healthy
from essaybench.runs.publish import PublishFailed, publish_target
from essaybench.stages.pipeline import (
    BENCHMARK_STAGES,
    LLM_STAGES,
    refuse_adaptive,
    resolve_upstream,
)
from essaybench.stages.shard import read_plan
from essaybench.stages.shard_assemble import write_plan_config, write_plan_registry
from essaybench.store import Store
from essaybench.store.parts import PartStore
from essaybench.store.runs import looks_like_run_id, record_run
from essaybench.store.store import new_run_id
from essaybench.tasks.alerts import alerts_stage_task
from essaybench.tasks.benchmark import WAITING, benchmark_stages_task
from essaybench.tasks.pairwise import pairwise_stage_task
from essaybench.tasks.publish import publish_task
from essaybench.tasks.report import report_task
from essaybench.tasks.shard import assemble_task, shard_plan_task
from essaybench.tasks.stats import stats_stage_task


def _flow_run_name() -> str:
    """The flow run's name: the essaybench run id given, else a new one, which the flow
    then takes as its run id (``_this_run``), so a scheduled run is named from the start.
    A flow run already named by a run id keeps it: a run resumed after waiting for provider
    batches (``batch_wait``) starts the flow again, and must find its own batches."""
    ctx = FlowRunContext.get()
    given = (ctx.parameters or {}).get("run_id") if ctx is not None else None
    current = ctx.flow_run.name if ctx is not None and ctx.flow_run is not None else ""
    return str(given) if given else current if looks_like_run_id(current) else new_run_id()


def _this_run(run_id: str | None) -> tuple[str, str | None]:
    """The essaybench run id of this flow run and the flow run's id; the flow run is named
    after the run id and tagged with it."""
    ctx = FlowRunContext.get()
    this = ctx.flow_run if ctx is not None else None
    if this is None:  # called as a plain function (pipeline_flow.fn)
        return run_id or new_run_id(), None
    if run_id is None:
        run_id = this.name if looks_like_run_id(this.name) else new_run_id()
    tags = sorted({*this.tags, run_id})
    with get_client(sync_client=True) as client:
        client.update_flow_run(this.id, name=run_id, tags=tags)
    this.tags = tags
    return run_id, str(this.id)


@flow(name="pipeline", flow_run_name=_flow_run_name)
def pipeline_flow(
    benchmark_config: str = DEFAULT_BENCHMARK_CONFIG,
    curate_config: str = DEFAULT_CURATE_CONFIG,
    store_root: str = DEFAULT_STORE_ROOT,
    curate: bool = True,
    from_stage: str = "generate",
    base_run: str | None = None,
    run_id: str | None = None,
    reuse_from: str | None = None,
    over_budget_ok: bool = False,
    uncalibrated_ok: bool = False,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
    shards: int | None = None,
    publish_to: str | None = None,
) -> dict[str, Any]:
    """``over_budget_ok``: go on even when the estimate exceeds the config's
    ``max_cost_usd`` (the CLI's --yes-over-budget); otherwise the run checks its budget
    itself, after curation and before the first call. ``lock_timeout_s``: how long to
    wait for another process's lock on the store (catalog and call ledger).
    ``shards``: run generate+judge as this many shards on the work pool (overrides the
    config's ``sharding.shards``; 0: in this process). ``publish_to``: publish the store
    there when the run ends, failed or not (else $ESSAYBENCH_PUBLISH_URL; neither: no
    publish); a publish that fails fails the flow."""
    if from_stage != "generate" and base_run is None:
        raise UserError(f"starting at {from_stage!r} needs base_run: the run whose "
                        "upstream snapshot it reads")
    target = publish_target(publish_to)  # a URL it cannot take fails before any call
    run_id, flow_run_id = _this_run(run_id)
    store = Store(store_root, lock_timeout_s)
    record_run(store, run_id, base_run=base_run, from_stage=from_stage,
               reuse_from=reuse_from, config_path=benchmark_config, flow_run_id=flow_run_id)
    try:
        # One frozen heap across the stages: each stage freezes what the ones before it
        # left, and the whole heap is not rescanned between them (a full pass after the
        # calls, 0.3 s at the paper's scale, when each stage unfroze on its way out).
        with frozen_heap():
            result = _run(store, store_root, run_id, benchmark_config, curate_config, curate,
                          from_stage, base_run, over_budget_ok, uncalibrated_ok,
                          lock_timeout_s, shards)
    except Exception as exc:
        if target is not None:  # the team sees what failed; the failure stays the error
            _publish_failed(run_id, store_root, target, lock_timeout_s)
        mistake = user_error_of(exc)
        if mistake is not None:  # a refusal (a judge not calibrated, over budget): its
            # message is the flow run's, as for an unhealthy run below
            return cast(dict[str, Any], Failed(message=str(mistake), data=exc))
        raise
    # Every stage has written its snapshot and catalog row by now: publish, then say how
    # the run went. A run below its coverage floor still fails. Its RunUnhealthy is
    # returned as the final state, not raised: the flow run ends Failed and a caller gets
    # the same exception (the CLI exits 1), without Prefect logging a traceback for what
    # is a verdict, not a crash.
    try:
        health = require_healthy(store, run_id, benchmark_config)
    except RunUnhealthy as unhealthy:
        if target is not None:
            _publish_failed(run_id, store_root, target, lock_timeout_s)
        return cast(dict[str, Any], Failed(message=unhealthy.explanation, data=unhealthy))
    result["health"] = health.summary() if health is not None else None
    if target is not None:
        try:
            result["published"] = publish_task(run_id, store_root, target, "finished",
                                               lock_timeout_s)
        except PublishFailed as failed:  # the run is good; only sharing it failed
            return cast(dict[str, Any], Failed(message=str(failed), data=failed))
    return result


def _publish_failed(run_id: str, store_root: str, url: str, lock_timeout_s: float) -> None:
    """Publish a failed run's store; a publish that fails too is logged, the run's own
    failure being what the flow ends with."""
    try:
        publish_task(run_id, store_root, url, "failed", lock_timeout_s)
    except PublishFailed as failed:
        get_run_logger().error("%s", failed)


def _run(store: Store, store_root: str, run_id: str, benchmark_config: str,
         curate_config: str, curate: bool, from_stage: str, base_run: str | None,
         over_budget_ok: bool, uncalibrated_ok: bool, lock_timeout_s: float,
         shards: int | None) -> dict[str, Any]:
    """The run's checks and stages, curation to the report page (the pipeline flow's
    parameters); returns what each stage wrote."""
    result: dict[str, Any] = {"run_id": run_id}
    config = load_benchmark_config(benchmark_config)
    if from_stage in LLM_STAGES:  # the run judges: its judges must be calibrated
        require_calibrated(store, config, load_registry(), benchmark_config, uncalibrated_ok,
                           force_with=_force_with())
    if curate and from_stage == "generate" and base_run is None and not curated_already(
            store, run_id):  # a run resumed after waiting for batches curated already
        result["curate"] = curate_flow(curate_config, store_root, run_id=run_id,
                                       lock_timeout_s=lock_timeout_s)
    if not over_budget_ok:
        require_within_budget(store_root, config, load_registry(), from_stage)
    upstream = (resolve_upstream(store, from_stage, base_run)
                if base_run is not None else None)
    snapshot_id = upstream.snapshot_id if upstream else None
    stages = BENCHMARK_STAGES[BENCHMARK_STAGES.index(from_stage):]
    # Generate and judge run in one task, sharing a gateway session: each essay is judged
    # as soon as it is written. Aggregate is a task of its own.
    llm = [s for s in stages if s in LLM_STAGES]
    sharding = sharding_of(config, shards) if llm == list(LLM_STAGES) else None
    if sharding is not None and config.sampling.mode == "adaptive":
        refuse_adaptive(llm, sharded=True)  # before any shard calls anything
    if sharding is not None:  # nor can shards use provider batches (no batch journal)
        refuse_in_shards(load_registry(), config.models())
    registry_path: str | None = None  # the registry file: the default, unless sharded
    if sharding is not None:  # the shards make the calls; their parts are the result
        result["shards"], done, pinned = _sharded_calls(
            run_id, benchmark_config, store_root, sharding, lock_timeout_s, uncalibrated_ok)
        result.update(done)
        snapshot_id = result[llm[-1]]
        # The stages after the assembly read the plan's config, not the file (which may
        # have been edited since planning): the run is one config throughout.
        benchmark_config, config = pinned[0], load_benchmark_config(pinned[0])
        registry_path = pinned[1]  # pairwise judging and the stats' families, the same
    elif llm:
        done = benchmark_stages_task("+".join(llm), run_id, benchmark_config, store_root,
                                     snapshot_id, uncalibrated_ok, lock_timeout_s,
                                     batch_waiting=batch_waiting())
        if WAITING in done:  # provider batches still open: wait without a process
            suspend_for_batches(done[WAITING])  # resumed: the flow starts again from the top
        result.update(done)
        snapshot_id = result[llm[-1]]
    result.update(benchmark_stages_task("aggregate", run_id, benchmark_config, store_root,
                                        snapshot_id, lock_timeout_s=lock_timeout_s))
    # Pairwise judging (when configured) and the statistics read what aggregate read.
    judged = (store.get_snapshot(result["judge"]) if "judge" in result
              else store.lineage(result["aggregate"])["judge"])
    essays_id = judged.upstream_snapshot_ids[0]
    if config.pairwise is not None:
        result["pairwise"] = pairwise_stage_task(run_id, benchmark_config, store_root,
                                                 essays_id, None, lock_timeout_s,
                                                 registry_path)
    result["stats"] = stats_stage_task(run_id, benchmark_config, store_root, run_id,
                                       judged.snapshot_id, result.get("pairwise"),
                                       lock_timeout_s, registry_path)
    # This week against the last comparable run: before the health verdict, so a run
    # that fails still says what moved.
    result["alerts"] = alerts_stage_task(run_id, benchmark_config, store_root,
                                         judged.snapshot_id, lock_timeout_s)
    result["reports"] = str(store.root / "reports" / run_id)
    result["language"] = language_summary(store.get_snapshot(essays_id).read(),
                                          config.judge.skip_off_language)
    # The HTML page of everything above (a failed run's too: it shows what went wrong).
    result["report"] = report_task(run_id, store_root, lock_timeout_s)
    return result


def _force_with() -> str:
    """How to force a changed judge through, said where the run was started: the
    parameter of a deployment's flow run; else the command line's flag (the CLI calls
    this flow in its own process)."""
    ctx = FlowRunContext.get()
    if ctx is not None and ctx.flow_run is not None and ctx.flow_run.deployment_id:
        return f"run it with the parameter {FORCE_PARAMETER}: true"
    return f"pass {FORCE_FLAG}"


def sharding_of(config: BenchmarkConfig, shards: int | None) -> ShardingParams | None:
    """The run's sharding: the config's, with ``shards`` (the flow parameter) overriding
    its count; None (in this process) when neither asks for shards."""
    if shards is not None and shards < 0:
        raise UserError(f"shards must be 0 (no sharding) or more, not {shards}")
    if shards == 0 or (shards is None and config.sharding is None):
        return None
    base = config.sharding or ShardingParams(shards=shards or 1)
    return base.model_copy(update={"shards": shards}) if shards else base


def parts_url_of(sharding: ShardingParams, store_root: str) -> str:
    return sharding.parts_url or PartStore.for_store(store_root).url


def _sharded_calls(run_id: str, config_path: str, store_root: str, sharding: ShardingParams,
                   lock_timeout_s: float, uncalibrated_ok: bool
                   ) -> tuple[dict[str, Any], dict[str, str], tuple[str, str]]:
    """Plan (the config and registry are read there, once), run every shard on the pool,
    assemble the generate and judge snapshots from their parts: returns what happened,
    the snapshot ids by stage and the plan's config and registry as files
    (``write_plan_config``, ``write_plan_registry``)."""
    parts = PartStore(parts_url_of(sharding, store_root))
    n, digest = shard_plan_task(run_id, config_path, store_root, parts.url, sharding.shards,
                                sharding.parallel, lock_timeout_s, sharding.limits,
                                sharding.liveness)
    with doing(f"shards ({n} on the work pool)"):  # the calls are made elsewhere meanwhile
        attempts = run_shards(parts, run_id, n, sharding, plan_digest=digest)
    snapshots = assemble_task(run_id, store_root, parts.url, uncalibrated_ok, lock_timeout_s)
    plan = read_plan(parts, run_id)
    assert plan is not None  # assembled from it
    pinned = (str(write_plan_config(store_root, plan)),
              str(write_plan_registry(store_root, plan)))
    return {"parts_url": parts.url, "attempts": attempts, "plan": digest}, snapshots, pinned
