"""The curation stages run against the store: what a Prefect task calls.

Each function takes the upstream stage's snapshot (never recomputes it) and
returns the snapshot it wrote. ``upstream_stage`` and ``resolve_upstream``
let a run start at any stage from an earlier run's snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from essaybench.curate.classify import run_classify
from essaybench.curate.collect import run_collect
from essaybench.curate.config import CurateConfig
from essaybench.curate.dedup import run_dedup
from essaybench.curate.filter import run_filter
from essaybench.curate.funnel import CURATE_STAGES, Funnel, compute_funnel
from essaybench.curate.labeler import PromptLabeler
from essaybench.curate.promptset import PromptSet, export_prompt_set, freeze_prompt_set
from essaybench.curate.rouge import run_rouge
from essaybench.curate.table import kept_rows
from essaybench.stages import run_stage
from essaybench.store import Snapshot, Store
from essaybench.version import code_version


class NoUpstreamError(LookupError):
    """A stage was asked to start from a snapshot that does not exist."""


def upstream_stage(stage: str) -> str | None:
    if stage not in CURATE_STAGES:
        raise ValueError(f"unknown curation stage {stage!r}; stages: {', '.join(CURATE_STAGES)}")
    i = CURATE_STAGES.index(stage)
    return CURATE_STAGES[i - 1] if i else None


def resolve_upstream(store: Store, stage: str, base_run: str | None = None) -> Snapshot | None:
    """The snapshot ``stage`` reads: the newest ok one of its upstream stage."""
    up = upstream_stage(stage)
    if up is None:
        return None
    return store.require_ok_snapshot(
        up, base_run, f"cannot start at {stage!r}",
        hint="run the curate flow from an earlier stage first", error=NoUpstreamError)


def run_curation_stage(
    store: Store, run_id: str, stage: str, config: CurateConfig,
    upstream: Snapshot | None, labeler: PromptLabeler | None = None,
) -> Snapshot:
    if stage == "collect":
        sources = config.load_sources()
        return run_stage(store, run_id=run_id, stage=stage, upstream=[],
                         params={"sources": sources.model_dump(mode="json")},
                         compute=lambda: run_collect(sources))
    if upstream is None:
        raise NoUpstreamError(f"stage {stage!r} needs its upstream snapshot")
    expected = upstream_stage(stage)
    if upstream.stage != expected:
        raise NoUpstreamError(
            f"stage {stage!r} reads a {expected!r} snapshot, got {upstream.snapshot_id}")
    table = kept_rows(upstream.read())
    if stage == "classify" and config.classify.mode == "rules+llm" and labeler is None:
        return _classify_with_gateway(store, run_id, config, upstream, table)
    computations: dict[str, tuple[Any, Any]] = {
        "filter": (config.filter, lambda: run_filter(table, config.filter)),
        "dedup": (config.dedup, lambda: run_dedup(table, config.dedup)),
        "rouge": (config.rouge, lambda: run_rouge(table, config.rouge)),
        "classify": (config.classify, lambda: run_classify(table, config.classify, labeler)),
    }
    params, compute = computations[stage]
    return run_stage(store, run_id=run_id, stage=stage, upstream=[upstream], params=params,
                     compute=compute, rows_in=table.height)


def _classify_with_gateway(store: Store, run_id: str, config: CurateConfig,
                           upstream: Snapshot, table: pl.DataFrame) -> Snapshot:
    """classify in rules+llm mode: the labeller's calls go through the gateway and ledger."""
    from essaybench.curate.llm_labeler import GatewayLabeler
    from essaybench.llm.registry import load_registry
    from essaybench.llm.session import open_gateway

    model = config.classify.llm_model
    if model is None:
        raise ValueError("classify mode 'rules+llm' needs classify.llm_model (a registry name)")
    with open_gateway(load_registry(), store.root, [model]) as session:
        labeler = GatewayLabeler(session.gateway, model)
        return run_stage(store, run_id=run_id, stage="classify", upstream=[upstream],
                         params=config.classify, rows_in=table.height,
                         compute=lambda: run_classify(table, config.classify, labeler))


@dataclass(frozen=True)
class PublishedPromptSet:
    version: str
    prompt_set: PromptSet
    funnel: Funnel
    paths: dict[str, Path]
    snapshot_id: str


def publish_prompt_set(store: Store, run_id: str, classified: Snapshot) -> PublishedPromptSet:
    """Freeze the classify snapshot, check the funnel over its lineage, export and record."""
    lineage = store.lineage(classified.snapshot_id)
    tables: dict[str, pl.DataFrame] = {stage: lineage[stage].read() for stage in CURATE_STAGES}
    funnel = compute_funnel(tables)
    prompt_set = freeze_prompt_set(tables["classify"])
    folder = store.root / "prompt_sets" / prompt_set.version
    manifest = {
        "classify_snapshot_id": classified.snapshot_id,
        "lineage": {stage: lineage[stage].snapshot_id for stage in CURATE_STAGES},
        "run_id": run_id, "code_version": code_version(),
    }
    paths = export_prompt_set(prompt_set, folder, manifest, funnel)
    store.record_prompt_set({
        "version": prompt_set.version, "snapshot_id": classified.snapshot_id,
        "run_id": run_id, "n_prompts": prompt_set.n_prompts, "counts": prompt_set.counts,
        "funnel": funnel.to_dict(), "jsonl_path": str(paths["jsonl"].relative_to(store.root)),
        "parquet_path": str(paths["parquet"].relative_to(store.root)),
    })
    return PublishedPromptSet(prompt_set.version, prompt_set, funnel, paths,
                              classified.snapshot_id)

