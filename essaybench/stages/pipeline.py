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
from datetime import UTC, datetime

from essaybench.bench.config import BenchmarkConfig
from essaybench.core.errors import UserError
from essaybench.core.memory import release_free_memory
from essaybench.llm.batch.route import BatchWaiting
from essaybench.llm.registry import Registry, check_judges, load_registry
from essaybench.llm.session import GatewaySession, open_gateway
from essaybench.runs.lineage import lineage_upstream, rerun_config, run_scope
from essaybench.stages.adaptive import AdaptiveSampler, adaptive_stage
from essaybench.stages.aggregate import aggregate_stage
from essaybench.stages.drift import anchor_requests, drift_stage
from essaybench.stages.generate import generate_stage
from essaybench.stages.judge import judge_stage
from essaybench.stages.shard import ShardError
from essaybench.store import Snapshot, Store

BENCHMARK_STAGES = ("generate", "judge", "aggregate")
LLM_STAGES = ("generate", "judge")  # the stages that share a gateway session


def run_stages(store: Store, run_id: str, config: BenchmarkConfig, stages: Sequence[str],
               upstream: Snapshot | None, uncalibrated_ok: bool = False,
               merged_since: datetime | None = None,
               registry: Registry | None = None,
               batch_waiting: BatchWaiting = "poll") -> dict[str, Snapshot]:
    """Run consecutive benchmark stages (e.g. generate, judge), each reading the snapshot
    the one before wrote; ``upstream`` is what the first reads (None for generate).

    The LLM stages share one gateway session: when generate and judge run together, each
    essay's judge calls are sent as soon as it is written, and their results pass to the
    judge stage in memory (they are in the ledger too, for a rerun). After judge, the
    judges re-score the anchor set (``drift``); ``uncalibrated_ok`` lets a changed judge
    re-calibrate instead of being refused.

    ``merged_since``: the run was sharded (``stages.shard``) and its shards' calls, made
    since then, are merged into the ledger: every generate and judge call is served from
    it, failures included (a run attempts each call once), and a call that would have to
    be sent is a gap in the merge: ``ShardError``. ``registry``: the models to call
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
        refuse_adaptive(stages, merged_since)
    sampler: AdaptiveSampler | None = None
    if llm:
        if stages[0] == "generate":  # a rerun from generate writes its base run's prompts
            config = rerun_config(store, run_id, config)
        registry = registry if registry is not None else load_registry()
        with open_gateway(registry, store.root, config.models(),
                          log_dir=store.root / "logs", scope=run_scope(store, run_id),
                          ledger_lock_timeout_s=store.lock_timeout_s,
                          batch_options=config.batch,
                          batch_waiting=batch_waiting) as session:
            check_judges(registry, config.judges())  # after the ledger lock, as any name
            replay_started = datetime.now(UTC)
            with session.reusing_failures_since(merged_since):
                for stage in llm:
                    if stage == "generate":
                        # The drift anchors' calls need no essay: sent with the first
                        # (not in a sharded run's replay, which must send nothing).
                        early = (anchor_requests(config.drift, config.judge)[1]
                                 if "judge" in stages and config.drift is not None
                                 and merged_since is None else [])
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
            if merged_since is not None:
                unmerged_calls(session, run_id, replay_started, config.judge.second_judge)
            if "judge" in llm and config.drift is not None:
                assert upstream is not None
                snapshots["drift"] = drift_stage(store, run_id, config, registry, session,
                                                 upstream, forced=uncalibrated_ok)
        release_free_memory()  # the session's calls, memos and held results are gone
    if "aggregate" in stages:
        if upstream is None:
            raise ValueError("aggregate needs the judge snapshot it reads")
        snapshots["aggregate"], _ = aggregate_stage(store, run_id, upstream,
                                                    config.health.coverage_floor,
                                                    config.flagged_essays)
    return snapshots


def refuse_adaptive(stages: Sequence[str], merged_since: datetime | None) -> None:
    """Adaptive sampling decides after each round which prompts come next: it needs
    generate and judge in one process, and cannot be split into shards planned up front."""
    if merged_since is not None:
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


def unmerged_calls(session: GatewaySession, run_id: str, since: datetime,
                   second_judge: str | None) -> None:
    """After a sharded run's replay: every call but the second judge's must have been
    served from the merged shard ledgers (the second judge looks at the essays flagged
    over the whole run, which no shard sees, so the replay sends those itself)."""
    rows = session.ledger.query(
        "SELECT model, count(*) AS n FROM llm_calls WHERE run_id = ? AND started_at >= ? "
        "GROUP BY model ORDER BY model", [run_id, since])
    sent = {str(r["model"]): int(r["n"]) for r in rows if r["model"] != second_judge}
    if sent:
        raise ShardError(f"run {run_id}: calls missing from the merged shard ledgers had to "
                         f"be sent: {', '.join(f'{m} {n}' for m, n in sent.items())}")
