"""The weekly benchmark's stages against the store: generate → judge → aggregate.

Each function reads its upstream snapshot (never recomputes it), writes its own, and
sends LLM calls through a gateway session whose ledger makes a rerun pay only for
calls that failed or never finished. ``BENCHMARK_STAGES`` and ``resolve_upstream``
let ``essaybench rerun --run RUN --stage judge`` start from an earlier run's snapshot.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime
from itertools import zip_longest
from pathlib import Path

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from essaybench.aggregate import export, table5, trait_means
from essaybench.analysis import StatsParams
from essaybench.compliance import compliance_rates, compliance_table
from essaybench.curate.promptset import GENRES
from essaybench.curate.table import StageOutput
from essaybench.generate import GenerateParams, run_generate
from essaybench.judge import JudgeParams, run_judge
from essaybench.judge_prefetch import JudgePrefetch
from essaybench.llm.registry import load_registry
from essaybench.llm.session import GatewaySession, open_gateway
from essaybench.pairwise import PairwiseParams
from essaybench.stages import run_stage
from essaybench.store import Snapshot, Store
from essaybench.yamlio import load_strict

BENCHMARK_STAGES = ("generate", "judge", "aggregate")
LLM_STAGES = ("generate", "judge")  # the stages that share a gateway session


class BenchmarkConfigError(ValueError):
    """The benchmark config is wrong: the message names the file."""


class BenchmarkConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_set: str = Field(default="latest",
                            description="Prompt-set version (ps-…), or 'latest' published.")
    per_genre: int | None = Field(default=None, ge=1,
                                  description="Sample this many prompts per genre (None: all).")
    sample_seed: int = Field(default=0, description="Seed of the per-genre prompt sample.")
    generate: GenerateParams
    judge: JudgeParams
    pairwise: PairwiseParams | None = Field(
        default=None, description="Order-swapped pairwise judging of the essays (optional).")
    stats: StatsParams = Field(default_factory=StatsParams,
                               description="Bootstrap settings of the stats stage.")

    def models(self) -> list[str]:
        pairwise = self.pairwise.judges if self.pairwise is not None else []
        return list(dict.fromkeys([*self.generate.models, *self.judge.judges, *pairwise]))


def load_benchmark_config(path: Path | str) -> BenchmarkConfig:
    path = Path(path)
    if not path.is_file():
        raise BenchmarkConfigError(f"benchmark config not found: {path}")
    try:
        return BenchmarkConfig.model_validate(load_strict(path.read_text(encoding="utf-8")))
    except ValidationError as exc:
        raise BenchmarkConfigError(f"benchmark config {path} is invalid:\n{exc}") from exc


def select_prompts(prompts: pl.DataFrame, per_genre: int | None, seed: int) -> pl.DataFrame:
    """Up to ``per_genre`` prompts of each genre, alternating Open and Constrained, drawn
    by a seeded shuffle of the prompt ids (so the sample does not depend on file order)."""
    if per_genre is None:
        return prompts
    rng = random.Random(seed)
    chosen: list[str] = []
    for genre in GENRES:
        pools = []
        for pset in ("open", "constrained"):
            ids = sorted(prompts.filter((pl.col("genre") == genre)
                                        & (pl.col("prompt_set") == pset))["prompt_id"].to_list())
            rng.shuffle(ids)
            pools.append(ids)
        interleaved = [pid for pair in zip_longest(*pools) for pid in pair if pid is not None]
        chosen.extend(interleaved[:per_genre])
    return prompts.filter(pl.col("prompt_id").is_in(chosen)).sort("genre", "prompt_id")


def prompt_set_input(store: Store, version: str) -> tuple[str, pl.DataFrame, Snapshot]:
    """(version, prompts, the classify snapshot it was frozen from)."""
    if version == "latest":
        latest = store.latest_prompt_set_version()
        if latest is None:
            raise LookupError(f"no prompt set published in {store.root}: run essaybench curate")
        version = latest
    record = store.get_prompt_set(version)
    if record is None:
        raise LookupError(f"prompt set {version!r} is not in {store.root}")
    prompts = pl.read_parquet(store.root / record["parquet_path"])
    return version, prompts, store.get_snapshot(record["snapshot_id"])


def generate_stage(store: Store, run_id: str, config: BenchmarkConfig,
                   session: GatewaySession, *, prefetch_judge: bool = False) -> Snapshot:
    """``prefetch_judge``: also send each fresh essay's judge calls as it comes back (for
    a run that judges next: a judge stage on the same session gets their results in
    memory, any other finds them in the ledger)."""
    version, prompts, upstream = prompt_set_input(store, config.prompt_set)
    selected = select_prompts(prompts, config.per_genre, config.sample_seed)
    params = {**config.generate.model_dump(mode="json"), "prompt_set": version,
              "per_genre": config.per_genre, "sample_seed": config.sample_seed}
    prefetch = JudgePrefetch.for_prompts(selected, config.judge) if prefetch_judge else None

    def compute() -> StageOutput:
        output = run_generate(selected, config.generate, session, version, follow_up=prefetch)
        if prefetch is not None and prefetch.errors:  # the judge stage meets them again
            output.meta.setdefault("follow_ups", {})["errors"] = prefetch.errors
        return output

    return run_stage(store, run_id=run_id, stage="generate", upstream=[upstream], params=params,
                     rows_in=selected.height, compute=compute)


def same_run_start(store: Store, run_id: str, upstream: Snapshot) -> datetime | None:
    """When ``upstream`` was written by ``run_id`` itself: the start of that stage run."""
    starts = [r.started_at for r in store.stage_runs(run_id, 1000)
              if r.snapshot_id == upstream.snapshot_id and r.status == "ok"]
    return min(starts) if starts else None


def judge_stage(store: Store, run_id: str, config: BenchmarkConfig, upstream: Snapshot,
                session: GatewaySession) -> Snapshot:
    """Judge ``upstream``'s essays. Judge calls the same run already made (prefetched
    while generating) are served, from the session's memory or the ledger — failures
    too, so a run attempts each call once; ``rerun --stage judge`` (a new run) retries
    the failures."""
    _expect(upstream, "generate")
    essays = upstream.read()

    def compute() -> StageOutput:
        with session.reusing_failures_since(same_run_start(store, run_id, upstream)):
            return run_judge(essays, config.judge, session)

    return run_stage(store, run_id=run_id, stage="judge", upstream=[upstream],
                     params=config.judge, rows_in=essays.height, compute=compute)


def aggregate_stage(store: Store, run_id: str, upstream: Snapshot) -> tuple[Snapshot, Path]:
    """Table 5 (weighted, w/o WT), trait means and length compliance; exported as
    Parquet, CSV and Markdown under ``<store>/reports/<run_id>/``."""
    _expect(upstream, "judge")
    judgments = upstream.read()
    essays = store.get_snapshot(upstream.upstream_snapshot_ids[0]).read()
    folder = store.root / "reports" / run_id

    def compute() -> StageOutput:
        main = table5(judgments, "score_weighted")
        checked = compliance_table(essays, prompt_column="prompt_text")
        tables = {"table5_weighted": main,
                  "table5_unweighted": table5(judgments, "score_unweighted"),
                  "trait_means": trait_means(judgments),
                  "length_compliance": compliance_rates(checked)}
        paths = export(tables, folder)
        return StageOutput(main, {"reports": sorted(str(p) for p in paths.values())})

    snapshot = run_stage(store, run_id=run_id, stage="aggregate", upstream=[upstream],
                         params={"scores": ["score_weighted", "score_unweighted"]},
                         rows_in=judgments.height, compute=compute)
    return snapshot, folder


def run_stages(store: Store, run_id: str, config: BenchmarkConfig, stages: Sequence[str],
               upstream: Snapshot | None) -> dict[str, Snapshot]:
    """Run consecutive benchmark stages (e.g. generate, judge), each reading the snapshot
    the one before wrote; ``upstream`` is what the first reads (None for generate).

    The LLM stages share one gateway session: when generate and judge run together, each
    essay's judge calls are sent as soon as it is written, and their results pass to the
    judge stage in memory (they are in the ledger too, for a rerun)."""
    order = list(BENCHMARK_STAGES)
    first = order.index(stages[0]) if stages and stages[0] in order else -1
    if first < 0 or list(stages) != order[first:first + len(stages)]:
        raise ValueError(f"stages {list(stages)} are not consecutive stages of "
                         f"{', '.join(order)}")
    snapshots: dict[str, Snapshot] = {}
    llm = [s for s in stages if s in LLM_STAGES]
    if llm:
        with open_gateway(load_registry(), store.root, config.models(),
                          log_dir=store.root / "logs") as session:
            for stage in llm:
                if stage == "generate":
                    upstream = generate_stage(store, run_id, config, session,
                                              prefetch_judge="judge" in stages)
                else:
                    assert upstream is not None
                    upstream = judge_stage(store, run_id, config, upstream, session)
                snapshots[stage] = upstream
    if "aggregate" in stages:
        if upstream is None:
            raise ValueError("aggregate needs the judge snapshot it reads")
        snapshots["aggregate"], _ = aggregate_stage(store, run_id, upstream)
    return snapshots


def resolve_upstream(store: Store, stage: str, base_run: str) -> Snapshot | None:
    """The snapshot ``stage`` reads when rerun from ``base_run`` (None for generate)."""
    if stage not in BENCHMARK_STAGES:
        raise ValueError(f"unknown benchmark stage {stage!r}; stages: "
                         f"{', '.join(BENCHMARK_STAGES)}")
    i = BENCHMARK_STAGES.index(stage)
    if i == 0:
        return None
    return store.require_ok_snapshot(BENCHMARK_STAGES[i - 1], base_run,
                                     f"cannot rerun {stage!r}")


def _expect(snapshot: Snapshot, stage: str) -> None:
    snapshot.require_stage(stage, "this benchmark stage")

