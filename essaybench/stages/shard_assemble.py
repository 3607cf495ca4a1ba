"""A sharded run's generate and judge snapshots, assembled from its shards' parts.

No replay: the shards' parts are the result. The parent first verifies every planned cell
against the shards' ``_SUCCESS.json`` records (each part there, byte for byte the sha256
recorded, its row count, and exactly the shard's planned cells: every (prompt, writer,
sample) once, every essay once per judge), and every ledger part a shard used. A gap is
one ``ShardError`` line naming the shard and the part, raised before the catalog gets a
row or anything could be sent. Then it merges the ledger parts into the store's ledger
(a rerun of the run finds every call), and writes the generate and judge snapshots from
the parts, Parquet to Parquet, with no model client.

What a shard cannot know is computed here from the assembled tables: the outlier flags
(an essay against the same model's others and the other models on its prompt) and the
per-run counts. Where ``judge.second_judge`` is configured the shards asked it about the
rows their own flags chose (every flag but ``WHOLE_RUN_FLAGS``); the essays only the
whole run flags (an outlier) are asked here: the only calls the parent sends for generate
and judge, through a gateway that knows no model but the second judge, opened only when
there are such essays. The drift stage (the judges re-score the anchors) follows in the
parent, as in a single-process run. Every model entry comes from the plan, never from
disk.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.generate import generate_meta
from essaybench.bench.health import call_counts
from essaybench.bench.judge.judgments import status_counts
from essaybench.bench.judge.second import complete_second_opinions
from essaybench.core.contracts import StageOutput
from essaybench.core.hashing import sha256_hex
from essaybench.llm.registry import ModelSpec, Registry
from essaybench.llm.scope import ReuseScope
from essaybench.llm.session import GatewaySession, open_gateway
from essaybench.runs.shards import Shard, ShardPlan, prompts_path, success_path
from essaybench.stages.drift import drift_stage
from essaybench.stages.generate import prompt_set_input, stage_params
from essaybench.stages.judge import flag_judgments, judgment_meta
from essaybench.stages.shard import SHARD_STAGES, ShardError, merge_ledgers
from essaybench.store import Snapshot, Store
from essaybench.store.parts import PartStore
from essaybench.store.run_stage import run_stage

ESSAY_KEYS = ("prompt_id", "model", "sample_index")
PLANS = "plans"  # under the store: each sharded run's pinned config, for its later stages


@dataclass(frozen=True)
class ShardParts:
    """One shard's verified parts and its ``_SUCCESS`` record."""

    index: int
    record: dict[str, Any]
    tables: dict[str, pl.DataFrame]


def plan_config(plan: ShardPlan) -> BenchmarkConfig:
    return BenchmarkConfig.model_validate(plan.config)


def write_plan_config(store_root: Path | str, plan: ShardPlan) -> Path:
    """The plan's benchmark config as a file, ``<store>/plans/<run>.yaml``, for the stages
    after the assembly (aggregate, pairwise, stats, alerts), which read a config file: in a
    sharded run they read the config the shards ran with, not ``benchmark.yaml`` as it is
    now (edited since planning?). Written as JSON, which YAML reads unchanged; rewritten
    by each attempt of the run (the plan is the run's, so the content is too). Not
    published with the store (``store.publish`` shares its own folders only)."""
    return _write_pinned(Path(store_root) / PLANS / f"{plan.run_id}.yaml", plan.config)


def write_plan_registry(store_root: Path | str, plan: ShardPlan) -> Path:
    """The plan's registry entries (no key: each names its variable) as a registry file,
    ``<store>/plans/<run>.models.yaml``, for the parent's later readers of the registry:
    pairwise judging and the statistics' model families."""
    return _write_pinned(Path(store_root) / PLANS / f"{plan.run_id}.models.yaml",
                         {"models": plan.specs})


def _write_pinned(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def plan_registry(plan: ShardPlan) -> Registry:
    """The registry entries the plan pinned (no key: each names its variable)."""
    return Registry(models={n: ModelSpec.model_validate(s) for n, s in plan.specs.items()})


def verify_shards(parts: PartStore, plan: ShardPlan) -> list[ShardParts]:
    """Every shard's parts, checked against its ``_SUCCESS.json`` and its planned cells;
    ``ShardError`` naming the shard and the part at the first gap."""
    config = plan_config(plan)
    out = []
    for shard in plan.shards:
        record = _success(parts, plan, shard.index)
        tables = {stage: _part(parts, plan, shard.index, record, stage)
                  for stage in SHARD_STAGES}
        _check_cells(parts, plan, shard, record, tables, config)
        out.append(ShardParts(shard.index, record, tables))
    return out


def _success(parts: PartStore, plan: ShardPlan, index: int) -> dict[str, Any]:
    where = f"run {plan.run_id}: shard {index}"
    records = {}
    for stage in SHARD_STAGES:
        rel = success_path(plan.run_id, stage, index)
        record = parts.read_json(rel)
        if not isinstance(record, dict):
            raise ShardError(f"{where} has no {parts.uri(rel)}: it never succeeded; "
                             "nothing assembled")
        records[stage] = record
    record = records[SHARD_STAGES[-1]]
    if not isinstance(record.get("sha256"), dict) or not isinstance(record.get("rows"), dict):
        raise ShardError(f"{where}: its _SUCCESS.json records no part hashes (written by an "
                         "older essaybench): remove it and run the shard again")
    if any(r.get("attempt") != record.get("attempt") for r in records.values()):
        raise ShardError(f"{where}: its generate and judge _SUCCESS.json name different "
                         "attempts; nothing assembled")
    return record


def _part(parts: PartStore, plan: ShardPlan, index: int, record: dict[str, Any],
          stage: str) -> pl.DataFrame:
    where = f"run {plan.run_id}: shard {index}'s {stage} part"
    rel = (record.get("parts") or {}).get(stage)
    if not isinstance(rel, str):
        raise ShardError(f"{where} is not named in its _SUCCESS.json; nothing assembled")
    if not parts.exists(rel):
        raise ShardError(f"{where} {parts.uri(rel)} is missing; nothing assembled")
    data = parts.read_bytes(rel)
    if sha256_hex(data) != record["sha256"].get(stage):
        raise ShardError(f"{where} {parts.uri(rel)} differs from the sha256 its "
                         "_SUCCESS.json recorded; nothing assembled")
    table = pl.read_parquet(io.BytesIO(data))
    if table.height != record["rows"].get(stage):
        raise ShardError(f"{where} {parts.uri(rel)} has {table.height} rows, its "
                         f"_SUCCESS.json says {record['rows'].get(stage)}; nothing assembled")
    return table


def _check_cells(parts: PartStore, plan: ShardPlan, shard: Shard, record: dict[str, Any],
                 tables: dict[str, pl.DataFrame], config: BenchmarkConfig) -> None:
    """The generate part holds each planned (prompt, writer, sample) once; the judge part
    each of those once per judge."""
    planned = {(p, m, i) for m in shard.models for p in shard.prompt_ids
               for i in range(config.generate.samples)}
    judges = config.judge.judges
    wanted: dict[str, set[tuple[Any, ...]]] = {
        "generate": {(*cell, None) for cell in planned},
        "judge": {(*cell, j) for cell in planned for j in judges}}
    for stage, table in tables.items():
        judge = pl.col("judge") if stage == "judge" else pl.lit(None, pl.Utf8)
        cells: list[tuple[Any, ...]] = [(p, m, int(i), j) for p, m, i, j in
                 table.select(*ESSAY_KEYS, judge.alias("_judge")).iter_rows()]
        got = set(cells)
        if len(cells) != len(got) or got != wanted[stage]:
            extra, missing = sorted(got - wanted[stage], key=str), \
                sorted(wanted[stage] - got, key=str)
            what = (f"{len(missing)} planned cell(s) missing, e.g. {missing[0][:3]}" if missing
                    else f"{len(extra)} cell(s) not in the plan, e.g. {extra[0][:3]}" if extra
                    else f"{len(cells) - len(got)} duplicate cell(s)")
            raise ShardError(f"run {plan.run_id}: shard {shard.index}'s {stage} part "
                             f"{parts.uri(record['parts'][stage])}: {what}; nothing assembled")


def assemble_run(store: Store, parts: PartStore, plan: ShardPlan,
                 forced: bool = False) -> dict[str, Snapshot]:
    """Verify, merge the ledgers, write the generate and judge snapshots (and drift where
    the plan's config has it) of a sharded run whose shards all succeeded; returns the
    snapshots by stage. ``forced``: a changed judge re-calibrates (``drift_stage``)."""
    if not plan.shards:
        raise ShardError(f"run {plan.run_id}: its plan has no shards (no prompt was "
                         "selected); nothing assembled")
    verified = verify_shards(parts, plan)  # before anything is written or sent
    merged = merge_ledgers(store, parts, plan)
    config = plan_config(plan)
    version, _, classified = prompt_set_input(store, plan.prompt_set_version)
    order = _order(parts, plan, config)
    essays = _assembled(verified, "generate", order)
    judged = _assembled(verified, "judge", order)
    registry = plan_registry(plan)
    selected = order["prompt_id"].height

    def generate() -> StageOutput:
        meta = generate_meta(essays, config.generate, registry.models, version, selected)
        follow = [(s.record.get("meta") or {}).get("generate", {}).get("follow_ups")
                  for s in verified]
        if any(f is not None for f in follow):
            meta["follow_ups"] = _summed([f for f in follow if f is not None])
        # what the merge did is this run's, not the snapshot's: in the catalog row
        return StageOutput(essays, meta, {"calls": meta["calls"], "shards": merged})

    generated = run_stage(store, run_id=plan.run_id, stage="generate", upstream=[classified],
                          params=stage_params(config, version, plan.rotation),
                          rows_in=selected, compute=generate)
    snapshots = {"generate": generated}

    def judge() -> StageOutput:
        table = flag_judgments(judged, essays, config)
        second = config.judge.second_judge
        if second is not None:  # the shards' opinions, and those only the whole run asks
            table = complete_second_opinions(
                table, essays, config.judge,
                lambda: _gateway(store, plan, registry, [second]))
        metas = [(s.record.get("meta") or {}).get("judge", {}) for s in verified]
        calls = {j: c.model_dump() for j, c in call_counts(table, "judge").items()}
        meta = {**_summed(metas), "counts": status_counts(table), "calls": calls,
                **judgment_meta(table, config)}
        repeats = [m.get("repeats") for m in metas if isinstance(m.get("repeats"), dict)]
        if repeats:  # the settings are every shard's; the counts add up
            meta["repeats"] = {**repeats[0], "calls": sum(int(r.get("calls") or 0)
                                                          for r in repeats),
                               "essays": int((table["repeats"].fill_null(1) > 1).sum())}
        return StageOutput(table, meta, {"calls": calls})

    snapshots["judge"] = run_stage(store, run_id=plan.run_id, stage="judge",
                                   upstream=[generated], params=config.judge,
                                   rows_in=essays.height, compute=judge)
    if config.drift is not None:  # the judges re-score the anchors, as in one process
        with _gateway(store, plan, registry, config.judges()) as session:
            snapshots["drift"] = drift_stage(store, plan.run_id, config, registry, session,
                                             snapshots["judge"], forced=forced)
    return snapshots


def _order(parts: PartStore, plan: ShardPlan, config: BenchmarkConfig) -> dict[str, pl.DataFrame]:
    """Each key's position in a single process's order: prompts as selected, then writers
    and judges as configured."""
    prompt_ids = parts.read_parquet(prompts_path(plan.run_id))["prompt_id"]
    return {"prompt_id": pl.DataFrame({"prompt_id": prompt_ids,
                                       "_p": range(prompt_ids.len())}),
            "model": pl.DataFrame({"model": list(config.generate.models),
                                   "_m": range(len(config.generate.models))}),
            "judge": pl.DataFrame({"judge": list(config.judge.judges),
                                   "_j": range(len(config.judge.judges))})}


def _assembled(verified: Sequence[ShardParts], stage: str,
               order: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The shards' parts of ``stage`` in one table, rows in a single process's order."""
    table = pl.concat([s.tables[stage] for s in verified], how="diagonal_relaxed")
    columns = table.columns
    keys = ["prompt_id", "model", *(["judge"] if stage == "judge" else [])]
    for key in keys:
        table = table.join(order[key], on=key, how="left", maintain_order="left")
    by = ["_p", "_m", "sample_index", *(["_j"] if stage == "judge" else [])]
    return table.sort(by, maintain_order=True).select(columns)


def _summed(metas: Sequence[Any]) -> Any:
    """Shard metas as one: numbers added, mappings merged key by key, anything else the
    first shard's (what every shard has alike: mode, rubric, params)."""
    present = [m for m in metas if m is not None]
    if not present:
        return None
    first = present[0]
    if isinstance(first, bool) or not isinstance(first, int | float | dict):
        return first
    if isinstance(first, dict):
        keys = list(dict.fromkeys(k for m in present if isinstance(m, dict) for k in m))
        return {k: _summed([m.get(k) for m in present if isinstance(m, dict)]) for k in keys}
    return sum(m for m in present if isinstance(m, int | float) and not isinstance(m, bool))


@contextmanager
def _gateway(store: Store, plan: ShardPlan, registry: Registry,
             models: Sequence[str]) -> Iterator[GatewaySession]:
    """A gateway session for ``models`` only, on the run's scope, from the plan's entries."""
    scope = ReuseScope.of_run(plan.run_id, plan.scope_runs, plan.scope_unattributed)
    wanted = Registry(models={m: registry.get(m) for m in models})
    with open_gateway(wanted, store.root, list(models), log_dir=Path(store.root) / "logs",
                      scope=scope, ledger_lock_timeout_s=store.lock_timeout_s) as session:
        yield session
