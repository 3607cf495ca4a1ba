"""The ``generate`` stage: every selected prompt of a prompt set, written by every model.

Reads the published prompt set (its classify snapshot is the upstream), writes the
essays snapshot; calls go through the caller's gateway session, so a rerun pays only
for calls that failed or never finished."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import polars as pl

from essaybench.bench.config import BenchmarkConfig, select_prompts
from essaybench.bench.generate import STAGE, run_generate
from essaybench.bench.judge.prefetch import JudgePrefetch
from essaybench.core.contracts import StageOutput
from essaybench.core.errors import NotFoundError
from essaybench.llm.session import GatewaySession
from essaybench.llm.types import ChatRequest
from essaybench.runs.lineage import check_session_run
from essaybench.runs.rotation import recorded_selection, rotation_selection
from essaybench.stages.gold import judge_config
from essaybench.store import Snapshot, Store
from essaybench.store.run_stage import run_stage
from essaybench.store.runs import get_run


def prompt_set_input(store: Store, version: str) -> tuple[str, pl.DataFrame, Snapshot]:
    """(version, prompts, the classify snapshot it was frozen from)."""
    if version == "latest":
        latest = store.latest_prompt_set_version()
        if latest is None:
            raise NotFoundError(f"no prompt set published in {store.root}: run essaybench curate")
        version = latest
    record = store.get_prompt_set(version)
    if record is None:
        raise NotFoundError(f"prompt set {version!r} is not in {store.root}")
    prompts = pl.read_parquet(store.root / record["parquet_path"])
    return version, prompts, store.get_snapshot(record["snapshot_id"])


def run_prompts(store: Store, run_id: str, config: BenchmarkConfig, prompts: pl.DataFrame,
                version: str) -> tuple[pl.DataFrame, dict[str, object] | None]:
    """The prompts ``run_id`` writes: the seeded per-genre sample, or with ``rotation``
    its weekly set (core + rotated, recorded in ``prompt_usage``; a rerun gets its base
    run's); and what to record about the rotation (None: no rotation)."""
    record = get_run(store, run_id)
    if config.rotation is None or config.per_genre is None \
            or (record is not None and record.base_run is not None):
        recorded = recorded_selection(store, run_id, prompts)  # a rerun: its base run's
        if recorded is None:
            return select_prompts(prompts, config.per_genre, config.sample_seed,
                                  config.genres), None
        selection, selected = recorded
    else:
        selection, selected = rotation_selection(store, run_id, prompts, version,
                                                 config.per_genre, config.rotation,
                                                 config.genres)
    settings = config.rotation.model_dump(mode="json") if config.rotation else {}
    return selected, {**settings, "week": selection.week,
                      "core_fingerprint": selection.fingerprint,
                      "n_core": len(selection.ids("core")),
                      "n_rotated": len(selection.ids("rotated")),
                      "notes": list(selection.notes)}


def stage_params(config: BenchmarkConfig, version: str,
                 rotation: dict[str, object] | None) -> dict[str, object]:
    """What the generate stage's catalog row records as its parameters."""
    params: dict[str, object] = {**config.generate.model_dump(mode="json"),
                                 "prompt_set": version, "per_genre": config.per_genre,
                                 "sample_seed": config.sample_seed}
    if rotation is not None:
        params["rotation"] = rotation
    return params


def generate_stage(store: Store, run_id: str, config: BenchmarkConfig,
                   session: GatewaySession, *, prefetch_judge: bool = False,
                   early: Sequence[ChatRequest] = (),
                   sampler: Callable[[pl.DataFrame, str], StageOutput] | None = None
                   ) -> Snapshot:
    """``prefetch_judge``: also send each fresh essay's judge calls as it comes back (for
    a run that judges next: a judge stage on the same session gets their results in
    memory, any other finds them in the ledger); and ``early`` (the drift anchors' calls)
    with the first essay's. ``sampler`` (adaptive sampling, ``stages/adaptive.py``):
    writes the essays of the prompts it samples from the selected ones (given them and
    the prompt-set version) instead of every selected prompt's; it sends ``early`` and
    prefetches itself."""
    version, prompts, upstream = prompt_set_input(store, config.prompt_set)
    check_session_run(session, run_id)
    selected, rotation = run_prompts(store, run_id, config, prompts, version)
    params = stage_params(config, version, rotation)
    if sampler is not None:  # recorded before the loop: a killed run's rerun finds it
        params["sampling"] = config.sampling.model_dump(mode="json")
    prefetch = None
    if prefetch_judge and sampler is None:  # the judge's calls, criteria included
        judging, _ = judge_config(store, run_id, config, version)
        prefetch = JudgePrefetch.for_prompts(selected, judging.judge,
                                             config.generate.min_chinese_share)
    if prefetch is not None:
        prefetch.early = list(early)

    def compute() -> StageOutput:
        if sampler is not None:
            return sampler(selected, version)
        output = run_generate(selected, config.generate, session, version, follow_up=prefetch)
        if prefetch is not None and prefetch.errors:  # the judge stage meets them again
            output.meta.setdefault("follow_ups", {})["errors"] = prefetch.errors
        return output

    return run_stage(store, run_id=run_id, stage=STAGE, upstream=[upstream], params=params,
                     rows_in=selected.height, compute=compute)
