"""The library's public functions: curate, run a benchmark, load a run's tables.

These are what the command line and the Prefect flows do, without Prefect: each stage
is called directly, in this process, reading and writing the store as the flows do.
``essaybench`` re-exports them (see ``essaybench.__all__``); ``write_report`` comes from
``essaybench.report``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from essaybench.bench.config import BenchmarkConfig, load_benchmark_config
from essaybench.core.paths import resource
from essaybench.curate.config import CurateConfig, load_curate_config
from essaybench.curate.funnel import CURATE_STAGES
from essaybench.llm.registry import Registry, load_registry
from essaybench.llm.session import open_gateway
from essaybench.runs.lineage import run_scope
from essaybench.stages.curate import PublishedPromptSet, publish_prompt_set, run_curation_stage
from essaybench.stages.pairwise import pairwise_stage
from essaybench.stages.pipeline import BENCHMARK_STAGES, run_stages
from essaybench.stages.stats import stats_stage
from essaybench.store import Snapshot, Store
from essaybench.store.runs import record_run
from essaybench.store.store import new_run_id

__all__ = ["BenchmarkRun", "RunTables", "curate_prompt_set", "load_tables", "run_benchmark"]


@dataclass(frozen=True)
class BenchmarkRun:
    """What ``run_benchmark`` did.

    Attributes:
        run_id: The run's id, under which the store records its snapshots and calls.
        store: The store the run wrote.
        snapshots: Each stage's snapshot by stage name (``generate``, ``judge``,
            ``drift`` when the config has one, ``aggregate``, ``pairwise`` when
            configured, ``stats``).
    """

    run_id: str
    store: Store
    snapshots: dict[str, Snapshot]


@dataclass(frozen=True)
class RunTables:
    """A run's result tables as polars DataFrames (``load_tables``).

    Attributes:
        run_id: The run these tables belong to.
        essays: The generate stage's table: one row per essay, with its status.
        judgments: The judge stage's table: one row per essay and judge, with its
            status and scores (never a default score: failures keep their status).
        table5: The aggregate stage's Table 5: per judge and model, the overall and
            per genre × Open/Constrained means with their coverage.
        leaderboard: Weighted scores with 95% confidence intervals per judge, model
            and cell (the stats stage's ``score_ci_weighted``); empty when the stats
            stage did not run.
        stats: Every table the stats stage wrote, by name (``score_ci_weighted``,
            ``rankings``, ``bias_*``, ...).
    """

    run_id: str
    essays: pl.DataFrame
    judgments: pl.DataFrame
    table5: pl.DataFrame
    leaderboard: pl.DataFrame
    stats: dict[str, pl.DataFrame] = field(default_factory=dict)


def _store(store: Store | str | Path) -> Store:
    return store if isinstance(store, Store) else Store(store)


def curate_prompt_set(config: CurateConfig | str | Path | None = None,
           store: Store | str | Path = "essaybench-store", *,
           run_id: str | None = None) -> PublishedPromptSet:
    """Build a prompt set from raw sources and publish it in the store.

    Runs collect → filter → dedup → rouge → classify and freezes the result as a new,
    content-hashed prompt-set version, which becomes the store's ``latest``.

    Args:
        config: A curate config, or the path of its YAML file; None curates the sample
            data bundled with essaybench (its ``configs/curate.yaml``).
        store: The store to write (a ``Store`` or its folder; made when missing).
        run_id: The id the stages are recorded under; None makes a new one.

    Returns:
        The published prompt set: its ``version``, the ``prompt_set`` itself, the
        curation ``funnel`` and the exported files' ``paths``.

    Raises:
        essaybench.curate.config.CurateConfigError: The config file is wrong.
        essaybench.stages.curate.EmptyPromptSetError: No prompt survived curation.
    """
    if config is None:
        config = resource("configs", "curate.yaml")
    if not isinstance(config, CurateConfig):
        config = load_curate_config(config)
    target = _store(store)
    run_id = run_id or new_run_id()
    snapshot: Snapshot | None = None
    for stage in CURATE_STAGES:
        snapshot = run_curation_stage(target, run_id, stage, config, snapshot)
    assert snapshot is not None
    return publish_prompt_set(target, run_id, snapshot)


def run_benchmark(config: BenchmarkConfig | str | Path,
                  store: Store | str | Path = "essaybench-store", *,
                  models: Registry | str | Path | None = None, run_id: str | None = None,
                  uncalibrated_ok: bool = False) -> BenchmarkRun:
    """Run a benchmark on the store's prompt set: generate → judge (→ drift) →
    aggregate (→ pairwise) → stats, without Prefect.

    Every LLM call is committed to the store's call ledger as it finishes, so a run
    interrupted and started again with the same ``run_id`` pays for nothing twice. The
    store must hold the prompt set the config names (``curate_prompt_set`` first).

    Args:
        config: A benchmark config, or the path of its YAML file.
        store: The store to read the prompt set from and write the run to.
        models: The model registry (a ``Registry``, or the path of its YAML file); None
            reads the default one (``$ESSAYBENCH_MODELS``, the project's, else the
            bundled embedded model).
        run_id: The run's id; None makes a new one.
        uncalibrated_ok: Let a judge whose calibration changed re-calibrate on the
            anchor set instead of being refused by the drift stage.

    Returns:
        The run's id, store and each stage's snapshot. The run's health verdict
        (coverage floor) is not checked here; read its tables with ``load_tables``.
    """
    if not isinstance(config, BenchmarkConfig):
        config = load_benchmark_config(config)
    registry = models if isinstance(models, Registry) else load_registry(models)
    target = _store(store)
    run_id = run_id or new_run_id()
    record_run(target, run_id)
    snapshots = run_stages(target, run_id, config, BENCHMARK_STAGES, None,
                           uncalibrated_ok, registry=registry)
    judged = snapshots["judge"]
    pairwise = None
    if config.pairwise is not None:
        with open_gateway(registry, target.root, config.pairwise.judges,
                          log_dir=target.root / "logs", scope=run_scope(target, run_id),
                          ledger_lock_timeout_s=target.lock_timeout_s) as session:
            pairwise = pairwise_stage(target, run_id, config.pairwise,
                                      snapshots["generate"], session)
        snapshots["pairwise"] = pairwise
    family_of = {name: spec.family for name, spec in registry.models.items()}
    snapshots["stats"], _ = stats_stage(target, run_id, config.stats, judged, pairwise,
                                        family_of, config.flagged_essays)
    return BenchmarkRun(run_id=run_id, store=target, snapshots=snapshots)


def load_tables(store: Store | str | Path, run_id: str) -> RunTables:
    """Read a finished run's tables from the store.

    Args:
        store: The store the run wrote (a ``Store`` or its folder).
        run_id: The run's id.

    Returns:
        The run's essays, judgments, Table 5, leaderboard and stats tables.

    Raises:
        LookupError: The store has no successful generate, judge or aggregate
            snapshot of ``run_id``.
    """
    source = _store(store)

    def table(stage: str) -> pl.DataFrame:
        snapshot = source.latest_ok_snapshot(stage, run_id)
        if snapshot is None:
            raise LookupError(f"run {run_id!r} has no successful {stage} snapshot in "
                              f"{source.root}")
        return snapshot.read()

    folder = source.root / "reports" / run_id / "stats"
    stats = ({path.stem: pl.read_parquet(path) for path in sorted(folder.glob("*.parquet"))}
             if folder.is_dir() and source.latest_ok_snapshot("stats", run_id) else {})
    return RunTables(run_id=run_id, essays=table("generate"), judgments=table("judge"),
                     table5=table("aggregate"),
                     leaderboard=stats.get("score_ci_weighted", pl.DataFrame()), stats=stats)
