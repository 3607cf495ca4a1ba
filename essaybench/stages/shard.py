"""A sharded run's generate+judge, without Prefect: the parent plans, each shard (on any
worker) writes its essays and judgments as Parquet parts and its calls as ledger parts,
and the parent merges.

- ``write_plan`` (parent): selects the prompts as the generate stage would, exports the
  calls the run may be served, and writes the plan (``runs.shards``).
- ``run_shard`` (a worker): generate and judge one shard through a ``PartLedger``; a
  shard whose ``_SUCCESS.json`` exists does nothing, and one re-sent after a crash is
  served every call its earlier attempts recorded.
- ``merge_ledgers`` (parent): checks every shard succeeded and appends the shard ledgers
  to the store's ledger. The parent then runs the generate and judge stages as usual:
  every call is served from the ledger (``expect_all_served``), so the stage snapshots and
  catalog rows are exactly what a single process writes, and ``check_merged`` compares
  them with the shards' parts.

DuckDB stays a single-writer file on the parent: the catalog and the ledger are written
only by the merge, never by two shards at once (see README, "Running on several machines").
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.generate import run_generate
from essaybench.bench.judge.prefetch import JudgePrefetch
from essaybench.bench.judge.second import SECOND_COLUMNS
from essaybench.core.errors import UserError
from essaybench.llm.ledger import ROW_SCHEMA, Ledger, as_ledger_frame
from essaybench.llm.part_ledger import PartLedger, ShardSuperseded
from essaybench.llm.registry import ModelSpec, Registry
from essaybench.llm.scope import ReuseScope
from essaybench.llm.session import LEDGER_FILE, open_gateway
from essaybench.runs.lineage import rerun_config, run_scope
from essaybench.runs.shards import (
    Shard,
    ShardPlan,
    heartbeat_path,
    ledger_prefix,
    owner_path,
    part_prefix,
    plan_path,
    plan_shards,
    prompts_path,
    seed_path,
    shared_limits,
    success_path,
)
from essaybench.stages.generate import prompt_set_input, run_prompts
from essaybench.stages.judge import judge_output
from essaybench.store import Store
from essaybench.store.liveness import Heartbeat
from essaybench.store.parts import PartStore

SHARD_STAGES = ("generate", "judge")
HEARTBEAT_S = 5.0
# Columns that differ between two runs of the same calls: when and how fast a call came
# back, and whether this process sent it or was served it.
VOLATILE_SUFFIXES = ("from_ledger", "latency_s", "_at")
# Columns of the judge stage computed over the whole run (outlier flags compare an essay
# with the same model's others; the second judge reads the flags): a shard's differ.
WHOLE_RUN_COLUMNS = ("judgment_flags", *SECOND_COLUMNS)


class ShardError(UserError, RuntimeError):
    """A sharded run cannot go on: a shard never succeeded, or the merge found a gap."""


def write_plan(store: Store, parts: PartStore, run_id: str, config: BenchmarkConfig,
               registry: Registry, shards: int, parallel: int | None = None) -> ShardPlan:
    """The run's plan; an existing one is kept (a restarted parent resumes its shards)."""
    existing = read_plan(parts, run_id, missing_ok=True)
    if existing is not None:
        return existing
    config = rerun_config(store, run_id, config)
    version, prompts, _ = prompt_set_input(store, config.prompt_set)
    selected, _ = run_prompts(store, run_id, config, prompts, version)
    scope = run_scope(store, run_id)
    seed: list[str] = []
    with Ledger(store.root / LEDGER_FILE, store.lock_timeout_s) as ledger:
        lent = ledger.export_runs(scope)
    if lent.height:
        parts.write_parquet(seed_path(run_id), lent)
        seed.append(seed_path(run_id))
    parts.write_parquet(prompts_path(run_id), selected)
    plan = ShardPlan(
        run_id=run_id, created_at=datetime.now(UTC), prompt_set_version=version,
        config=config.model_dump(mode="json"),
        specs={m: registry.get(m).model_dump(mode="json") for m in config.models()},
        scope_runs=sorted(scope.runs or ()), scope_unattributed=scope.unattributed, seed=seed,
        parallel=parallel or shards,
        shards=plan_shards(config.generate.models, selected["prompt_id"].to_list(), shards))
    parts.write_json(plan_path(run_id), plan.model_dump(mode="json"))
    return plan


def read_plan(parts: PartStore, run_id: str, missing_ok: bool = False) -> ShardPlan | None:
    doc = parts.read_json(plan_path(run_id))
    if doc is None:
        if missing_ok:
            return None
        raise ShardError(f"run {run_id} has no shard plan under {parts.uri(plan_path(run_id))}")
    return ShardPlan.model_validate(doc)


def shard_done(parts: PartStore, run_id: str, index: int) -> bool:
    return parts.exists(success_path(run_id, SHARD_STAGES[-1], index))


def _shard_prompts(parts: PartStore, plan: ShardPlan, shard: Shard) -> pl.DataFrame:
    prompts = parts.read_parquet(prompts_path(plan.run_id))
    return prompts.filter(pl.col("prompt_id").is_in(list(shard.prompt_ids)))


def superseded(parts: PartStore, run_id: str, index: int, attempt: str) -> bool:
    """Has the parent sent a newer attempt of this shard (it took this one for dead)?"""
    owner = parts.read_json(owner_path(run_id, index))
    return isinstance(owner, dict) and owner.get("attempt") not in (None, attempt)


def run_shard(parts: PartStore, run_id: str, index: int,
              attempt: str | None = None) -> dict[str, Any]:
    """Generate and judge shard ``index`` of ``run_id``; returns its ``_SUCCESS`` record.
    ``attempt``: this attempt's name (the shard's flow run id; default: a random one), in
    its heartbeat, part names and record. An attempt the parent has replaced (its
    ``owner`` names another) stops recording calls and writes nothing: ``ShardSuperseded``."""
    plan = read_plan(parts, run_id)
    assert plan is not None
    if not 0 <= index < len(plan.shards):
        raise ShardError(f"run {run_id} has shards 0–{len(plan.shards) - 1}, not {index}")
    if shard_done(parts, run_id, index):
        done = parts.read_json(success_path(run_id, SHARD_STAGES[-1], index))
        return {**(done or {}), "already_done": True}
    shard = plan.shards[index]
    config = BenchmarkConfig.model_validate(plan.config)
    judges = config.judges()
    registry = Registry(models={
        n: ModelSpec.model_validate(shared_limits(s, plan.sharing(n, judges)))
        for n, s in plan.specs.items()})
    prompts = _shard_prompts(parts, plan, shard)
    scope = ReuseScope.of_run(run_id, plan.scope_runs, plan.scope_unattributed)
    ledger = PartLedger(parts, ledger_prefix(run_id, index), plan.seed, attempt=attempt)
    started = datetime.now(UTC)

    def beat() -> None:
        if superseded(parts, run_id, index, ledger.attempt):
            ledger.superseded.set()
            return
        parts.put_json(heartbeat_path(run_id, index, ledger.attempt), {
            "at": datetime.now(UTC).isoformat(), "host": socket.gethostname(),
            "pid": os.getpid(), "attempt": ledger.attempt, "started_at": started.isoformat()})

    def stop_if_superseded(when: str) -> None:
        if ledger.superseded.is_set():
            raise ShardSuperseded(f"shard {index} of run {run_id}: attempt {ledger.attempt} "
                                  f"was superseded by a newer one {when}; it writes no part")

    beat()
    stop_if_superseded("before it started")
    try:
        with Heartbeat(beat, HEARTBEAT_S), tempfile.TemporaryDirectory() as work, \
                open_gateway(registry, work, [*shard.models, *judges], scope=scope,
                             log_dir=Path(work) / "logs", ledger=ledger) as session, \
                session.reusing_failures_since(plan.created_at):
            prefetch = JudgePrefetch.for_prompts(prompts, config.judge,
                                                 config.generate.min_chinese_share)
            params = config.generate.model_copy(update={"models": tuple(shard.models)})
            essays = run_generate(prompts, params, session, plan.prompt_set_version,
                                  follow_up=prefetch)
            judged = judge_output(essays.table, config, session, second=False)
            sent = session.gateway.sent_total
    except* ShardSuperseded:  # raised by the ledger inside the gateway's task group
        stop_if_superseded("while it ran")
        raise
    record: dict[str, Any] = {
        "run_id": run_id, "shard": index, "attempt": ledger.attempt,
        "host": socket.gethostname(), "pid": os.getpid(), "started_at": started.isoformat(),
        "finished_at": datetime.now(UTC).isoformat(), "sent": sent,
        "served_at_start": ledger.loaded_rows, "essays": essays.table.height,
        "judgments": judged.table.height, "parts": {}}
    beat()  # a last look: a superseded attempt writes no part
    stop_if_superseded("as it finished")
    for stage, table in (("generate", essays.table), ("judge", judged.table)):
        rel = f"{part_prefix(run_id, stage, index)}/part-{ledger.attempt}.parquet"
        parts.write_parquet(rel, table)
        record["parts"][stage] = rel
    for stage in SHARD_STAGES:  # judge last: its _SUCCESS is the shard's
        parts.put_json(success_path(run_id, stage, index), record)
    return record


def merge_ledgers(store: Store, parts: PartStore, plan: ShardPlan) -> dict[str, int]:
    """Append every shard's ledger parts to the store's ledger (idempotent); refuses while
    any shard has not succeeded.

    A call that both the successful attempt of a shard and an earlier attempt made (the
    earlier one was taken for dead while it still ran, or was killed after the call came
    back and before it was stored) was paid twice; the successful attempt's row is the one
    its parts used, so only that one is merged: the stage replay then serves exactly what
    the shard wrote. The other rows are counted (``superseded``), not merged."""
    missing = [s.index for s in plan.shards if not shard_done(parts, plan.run_id, s.index)]
    if missing:
        raise ShardError(f"run {plan.run_id}: shard(s) {', '.join(map(str, missing))} of "
                         f"{len(plan.shards)} never succeeded; nothing merged")
    frames: list[pl.DataFrame] = []
    n_parts = superseded = 0
    for shard in plan.shards:
        done = parts.read_json(success_path(plan.run_id, SHARD_STAGES[-1], shard.index)) or {}
        mine = f"part-{done.get('attempt')}-"
        rels = parts.list(ledger_prefix(plan.run_id, shard.index), ".parquet")
        n_parts += len(rels)
        won = [r for r in rels if r.rsplit("/", 1)[-1].startswith(mine)]
        lost = [r for r in rels if r not in won]
        winner = _ledger_rows(parts, won)
        earlier = _ledger_rows(parts, lost)
        if earlier.height and winner.height:
            again = earlier["key"].is_in(winner["key"].implode())
            superseded += int(again.sum())
            earlier = earlier.filter(~again)
        frames += [f for f in (earlier, winner) if f.height]
    frame = pl.concat(frames) if frames else pl.DataFrame()
    with Ledger(store.root / LEDGER_FILE, store.lock_timeout_s) as ledger:
        before = ledger.count()
        if frame.height:
            ledger.insert_frame(frame, "ledger_import")
        added = ledger.count() - before
    return {"shards": len(plan.shards), "ledger_parts": n_parts, "rows": frame.height,
            "added": added, "superseded": superseded}


def _ledger_rows(parts: PartStore, rels: Sequence[str]) -> pl.DataFrame:
    frames = [as_ledger_frame(parts.read_parquet(r)) for r in rels]
    return pl.concat(frames) if frames else pl.DataFrame(schema=ROW_SCHEMA)


def stable_rows(table: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """``table`` without its volatile columns, sorted by ``keys``: two runs of the same
    calls give equal frames."""
    keep = [c for c in table.columns if not c.endswith(VOLATILE_SUFFIXES)]
    return table.select(keep).sort(list(keys))


ROW_KEYS = {"generate": ("prompt_id", "model", "sample_index"),
            "judge": ("prompt_id", "model", "sample_index", "judge")}


def shard_parts(parts: PartStore, plan: ShardPlan, stage: str) -> pl.DataFrame:
    """The parts of ``stage`` that the shards' successful attempts wrote, concatenated."""
    rels = []
    for shard in plan.shards:
        done = parts.read_json(success_path(plan.run_id, stage, shard.index))
        if done is None:
            raise ShardError(f"shard {shard.index} of run {plan.run_id} has no {stage} part")
        rels.append(done["parts"][stage])
    return parts.read_parquets(rels)


def check_merged(parts: PartStore, plan: ShardPlan, stage: str, merged: pl.DataFrame) -> None:
    """The stage snapshot the parent wrote holds exactly the shards' rows."""
    keys = ROW_KEYS[stage]
    ours, theirs = stable_rows(merged, keys), stable_rows(shard_parts(parts, plan, stage), keys)
    whole = [c for c in WHOLE_RUN_COLUMNS if c in ours.columns]
    ours, theirs = ours.drop(whole), theirs.drop(whole, strict=False)
    differs = first_difference(ours, theirs, keys)
    if differs is not None:
        raise ShardError(f"run {plan.run_id}: the merged {stage} snapshot ({ours.height} rows) "
                         f"differs from its shards' parts ({theirs.height} rows): {differs}")


def first_difference(a: pl.DataFrame, b: pl.DataFrame, keys: Sequence[str]) -> str | None:
    """Where two tables sorted by ``keys`` first differ (None: equal): the column, and the
    keys of the first row that differs in it."""
    if a.columns != b.columns:
        return f"columns {a.columns} against {b.columns}"
    if a.height != b.height:
        return f"{a.height} rows against {b.height}"
    for column in a.columns:
        left, right = a[column], b[column]
        if left.dtype != right.dtype:
            return f"column {column!r} is {left.dtype} against {right.dtype}"
        same = (left == right) | (left.is_null() & right.is_null())
        if not same.fill_null(False).all():
            row = int((~same.fill_null(False)).arg_max() or 0)
            where = ", ".join(f"{k}={a[k][row]}" for k in keys)
            return f"column {column!r} at {where}"
    return None

