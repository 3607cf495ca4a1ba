"""The weekly benchmark's stages in order: generate → judge (→ drift) → aggregate.

``run_stages`` runs consecutive stages, each reading the snapshot the one before wrote;
``BENCHMARK_STAGES`` and ``resolve_upstream`` let ``essaybench rerun --run RUN --stage
judge`` start from an earlier run's snapshot (along its lineage: see ``runs/lineage.py``).
The LLM stages' session is scoped to the run: it serves only calls the run's recorded
reuse scope allows. The judge step is followed, in the same session, by the ``drift``
stage (every judge re-scores the anchor set) unless the config turns it off. The Prefect
``pipeline`` flow (``flows/pipeline.py``) calls these through its tasks."""

from __future__ import annotations

from collections.abc import Sequence

from essaybench.bench.config import BenchmarkConfig
from essaybench.core.errors import UserError
from essaybench.core.gcfreeze import frozen_heap
from essaybench.core.memory import release_free_memory
from essaybench.llm.batch.route import BatchWaiting
from essaybench.llm.registry import Registry, check_judges, load_registry
from essaybench.llm.session import open_gateway
from essaybench.runs.lineage import lineage_upstream, rerun_config, run_scope
from essaybench.stages.adaptive import AdaptiveSampler, adaptive_stage
from essaybench.stages.aggregate import aggregate_stage
from essaybench.stages.drift import anchor_requests, drift_stage
from essaybench.stages.generate import generate_stage
from essaybench.stages.judge import judge_stage
from essaybench.store import Snapshot, Store

BENCHMARK_STAGES = ("generate", "judge", "aggregate")
LLM_STAGES = ("generate", "judge")  # the stages that share a gateway session


def run_stages(store: Store, run_id: str, config: BenchmarkConfig, stages: Sequence[str],
               upstream: Snapshot | None, uncalibrated_ok: bool = False,
               registry: Registry | None = None,
               batch_waiting: BatchWaiting = "poll") -> dict[str, Snapshot]:
    """Run consecutive benchmark stages (e.g. generate, judge), each reading the snapshot
    the one before wrote; ``upstream`` is what the first reads (None for generate).

    The LLM stages share one gateway session: when generate and judge run together, each
    essay's judge calls are sent as soon as it is written, and their results pass to the
    judge stage in memory (they are in the ledger too, for a rerun). After judge, the
    judges re-score the anchor set (``drift``); ``uncalibrated_ok`` lets a changed judge
    re-calibrate instead of being refused.

    A sharded run's generate and judge are not run here: ``stages.shard_assemble`` writes
    them from the shards' parts. ``registry``: the models to call
    (None: ``load_registry()``, the default one). ``batch_waiting``: how the calls of
    entries with a batch API are waited for (``llm.batch.route``): "poll" in this process,
    or "return": ``BatchesPending`` once everything else is done, to be entered again
    (the same run id) when the batches may have ended; nothing is submitted twice."""
    order = list(BENCHMARK_STAGES)
    first = order.index(stages[0]) if stages and stages[0] in order else -1
    if first < 0 or list(stages) != order[first:first + len(stages)]:
        raise ValueError(f"stages {list(stages)} are not consecutive stages of "
                         f"{', '.join(order)}")
    snapshots: dict[str, Snapshot] = {}
    llm = [s for s in stages if s in LLM_STAGES]
    adaptive = config.sampling.mode == "adaptive" and "generate" in stages
    if adaptive:
        refuse_adaptive(stages, sharded=False)
    sampler: AdaptiveSampler | None = None
    if llm:
        with frozen_heap():
            if stages[0] == "generate":  # a rerun from generate writes its base run's prompts
                config = rerun_config(store, run_id, config)
            registry = registry if registry is not None else load_registry()
            with open_gateway(registry, store.root, config.models(),
                              log_dir=store.root / "logs", scope=run_scope(store, run_id),
                              ledger_lock_timeout_s=store.lock_timeout_s,
                              batch_options=config.batch,
                              batch_waiting=batch_waiting) as session:
                check_judges(registry, config.judges())  # after the ledger lock, as any name
                for stage in llm:
                    if stage == "generate":
                        # The drift anchors' calls need no essay: sent with the first.
                        early = (anchor_requests(config.drift, config.judge)[1]
                                 if "judge" in stages and config.drift is not None else [])
                        sampler = (AdaptiveSampler(store, run_id, config, session, early)
                                   if adaptive else None)
                        upstream = generate_stage(store, run_id, config, session,
                                                  prefetch_judge="judge" in stages,
                                                  early=early, sampler=None if sampler
                                                  is None else sampler.essays)
                    else:
                        assert upstream is not None
                        upstream = judge_stage(store, run_id, config, upstream, session)
                    snapshots[stage] = upstream
                    if stage == "judge" and sampler is not None:  # what it decided on
                        snapshots["adaptive"] = adaptive_stage(store, run_id, sampler,
                                                               upstream)
                if "judge" in llm and config.drift is not None:
                    assert upstream is not None
                    snapshots["drift"] = drift_stage(store, run_id, config, registry, session,
                                                     upstream, forced=uncalibrated_ok)
            # the session's calls, memos and held results are gone; the collection scans
            # only what the stages made (what the caller holds is frozen: in a test or a
            # notebook, millions of objects a full pass would scan each time)
            release_free_memory()
    if "aggregate" in stages:
        if upstream is None:
            raise ValueError("aggregate needs the judge snapshot it reads")
        snapshots["aggregate"], _ = aggregate_stage(store, run_id, upstream,
                                                    config.health.coverage_floor,
                                                    config.flagged_essays)
    return snapshots


def refuse_adaptive(stages: Sequence[str], sharded: bool) -> None:
    """Adaptive sampling decides after each round which prompts come next: it needs
    generate and judge in one process, and cannot be split into shards planned up front."""
    if sharded:
        raise UserError("sampling: adaptive cannot run sharded (its rounds depend on the "
                        "scores so far): set sharding: null or --shards 0, or sampling: "
                        "mode: full")
    if "judge" not in stages:
        raise UserError("sampling: adaptive needs generate and judge in one run (each "
                        "round is judged before the next is asked for)")


def resolve_upstream(store: Store, stage: str, base_run: str) -> Snapshot | None:
    """The snapshot ``stage`` reads when rerun from ``base_run`` (None for generate),
    found along ``base_run``'s lineage."""
    if stage not in BENCHMARK_STAGES:
        raise ValueError(f"unknown benchmark stage {stage!r}; stages: "
                         f"{', '.join(BENCHMARK_STAGES)}")
    i = BENCHMARK_STAGES.index(stage)
    if i == 0:
        return None
    return lineage_upstream(store, stage, BENCHMARK_STAGES[i - 1], base_run)
