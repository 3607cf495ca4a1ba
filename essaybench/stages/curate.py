"""The curation chain: collect → filter → dedup → rouge → classify → a published prompt set.

Each stage (one module per stage in this package) takes the upstream stage's snapshot
(never recomputes it) and returns the snapshot it wrote. ``resolve_upstream`` lets a
run start at any stage from an earlier run's snapshots; ``publish_prompt_set`` freezes
the classify snapshot into a versioned prompt set.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from essaybench.core.errors import UserError
from essaybench.core.version import code_version
from essaybench.curate.config import CurateConfig
from essaybench.curate.funnel import CURATE_STAGES, FUNNEL_COLUMNS, Funnel, compute_funnel
from essaybench.curate.labeler import PromptLabeler
from essaybench.curate.promptset import PromptSet, export_prompt_set, freeze_prompt_set
from essaybench.stages.classify import classify_stage
from essaybench.stages.collect import collect_stage
from essaybench.stages.curate_step import NoUpstreamError, upstream_stage
from essaybench.stages.dedup import dedup_stage
from essaybench.stages.filter import filter_stage
from essaybench.stages.gold import carry_gold_set
from essaybench.stages.rouge import rouge_stage
from essaybench.store import Snapshot, Store

__all__ = [
    "EmptyPromptSetError", "PublishedPromptSet", "publish_prompt_set", "resolve_upstream",
    "run_curation_stage",
]


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
    """Run one curation stage by name (what the ``curation-stage`` Prefect task calls)."""
    if stage == "collect":
        return collect_stage(store, run_id, config)
    if stage == "classify":
        return classify_stage(store, run_id, config, upstream, labeler)
    steps = {"filter": filter_stage, "dedup": dedup_stage, "rouge": rouge_stage}
    if stage not in steps:
        upstream_stage(stage)  # raises, naming the stages
    return steps[stage](store, run_id, config, upstream)


class EmptyPromptSetError(UserError, ValueError):
    """No prompt survived curation: nothing is published (``latest`` stays as it was)."""


@dataclass(frozen=True)
class PublishedPromptSet:
    """A prompt set ``curate`` froze and published: its ``version`` (ps-…), the
    ``prompt_set``, the curation ``funnel`` (records removed per stage), the exported
    files' ``paths`` and the classify ``snapshot_id`` it was frozen from."""

    version: str
    prompt_set: PromptSet
    funnel: Funnel
    paths: dict[str, Path]
    snapshot_id: str


def publish_prompt_set(store: Store, run_id: str, classified: Snapshot) -> PublishedPromptSet:
    """Freeze the classify snapshot, check the funnel over its lineage, export and record."""
    lineage = store.lineage(classified.snapshot_id)
    # The funnel reads decisions only: at 10^6 raw records the full collect and filter
    # tables (raw and normalised text) were gigabytes read for a count.
    tables: dict[str, pl.DataFrame] = {
        stage: lineage[stage].read() if stage == "classify" else lineage[stage].read(
            FUNNEL_COLUMNS) for stage in CURATE_STAGES}
    funnel = compute_funnel(tables)
    prompt_set = freeze_prompt_set(tables["classify"])
    if prompt_set.n_prompts == 0:
        steps = ", ".join(f"{name} −{removed}" for name, removed, _ in funnel.steps()[1:]
                          if removed)
        latest = store.latest_prompt_set_version()
        raise EmptyPromptSetError(
            f"no prompt survived curation ({funnel.raw} raw records: {steps or 'none'}): "
            f"nothing published; the latest prompt set stays {latest or '(none)'}")
    previous = store.latest_prompt_set_version()
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
    carry_gold_set(store, previous, prompt_set.version)  # the gold items it still holds
    return PublishedPromptSet(prompt_set.version, prompt_set, funnel, paths,
                              classified.snapshot_id)

