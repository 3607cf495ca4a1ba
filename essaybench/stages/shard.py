"""A sharded run's generate+judge, without Prefect: the parent plans, each shard (on any
worker) writes its essays and judgments as Parquet parts and its calls as ledger parts,
and the parent assembles the result from them.

- ``write_plan`` (parent): selects the prompts as the generate stage would, exports the
  calls the run may be served, and writes the plan (``runs.shards``): config, registry
  entries, rubric fingerprints and code version pinned.
- ``run_shard`` (a worker): refuses a plan other than the parent's (its digest) or one
  pinned to other code or rubrics; generates and judges one shard through a
  ``PartLedger``. A shard whose ``_SUCCESS.json`` exists does nothing, and one re-sent
  after a crash is served every call its earlier attempts recorded. Its ``_SUCCESS.json``
  holds each part's row count and sha256, and the sha256 of every ledger part it used.
- ``stages.shard_assemble`` (parent): verifies every shard's parts against those records
  before anything is written or could be sent, merges the ledger parts into the store's
  ledger (``merge_ledgers``), and writes the generate and judge snapshots from the parts:
  no replay, no model client for them.

DuckDB stays a single-writer file on the parent: the catalog and the ledger are written
only by the assembly, never by two shards at once (see README, "Running on several
machines").
"""

from __future__ import annotations

import io
import os
import socket
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import polars as pl

from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.generate import run_generate
from essaybench.bench.judge.prefetch import JudgePrefetch
from essaybench.bench.judge.request import load_prompt_for, load_scoring
from essaybench.core.errors import UserError
from essaybench.core.hashing import sha256_hex
from essaybench.core.version import code_fingerprint, code_version
from essaybench.llm.ledger import ROW_SCHEMA, Ledger, as_ledger_frame
from essaybench.llm.part_ledger import PartLedger, ShardSuperseded
from essaybench.llm.ratelimit import LimiterFactory, local_limiter
from essaybench.llm.registry import ModelSpec, Registry
from essaybench.llm.scope import ReuseScope
from essaybench.llm.session import LEDGER_FILE, open_gateway
from essaybench.runs.lineage import rerun_config, run_scope
from essaybench.runs.shards import (
    Shard,
    ShardPlan,
    ShardRefused,
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


class ShardError(UserError, RuntimeError):
    """A sharded run cannot go on: a shard never succeeded, or the merge found a gap."""


class PlanMismatch(ShardError, ShardRefused):
    """A shard's plan is not its parent's, or was made with other code or rubrics: sending
    it again cannot help (the parent does not)."""


def write_plan(store: Store, parts: PartStore, run_id: str, config: BenchmarkConfig,
               registry: Registry, shards: int, parallel: int | None = None,
               limits: Literal["shared", "split"] = "split",
               liveness: Literal["prefect", "parts"] = "parts") -> ShardPlan:
    """The run's plan; an existing one is kept (a restarted parent resumes its shards).
    ``limits``: how the shards keep each model's limits (``ShardPlan.limits``);
    ``liveness``: whether they write heartbeat files (``ShardPlan.liveness``)."""
    existing = read_plan(parts, run_id, missing_ok=True)
    if existing is not None:
        return existing
    refuse_unshardable(config)
    config = rerun_config(store, run_id, config)
    version, prompts, _ = prompt_set_input(store, config.prompt_set)
    selected, rotation = run_prompts(store, run_id, config, prompts, version)
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
        parallel=parallel or shards, limits=limits, liveness=liveness,
        shards=plan_shards(config.generate.models, selected["prompt_id"].to_list(), shards),
        code_version=code_version(), code_fingerprint=code_fingerprint(),
        pins=rubric_pins(config), rotation=rotation)
    parts.write_json(plan_path(run_id), plan.model_dump(mode="json"))
    stored = read_plan(parts, run_id)  # as every shard reads it: the digest they compare
    assert stored is not None
    return stored


def refuse_unshardable(config: BenchmarkConfig) -> None:
    """What a shard cannot do on its own part of the run, refused before any call."""
    judge = config.judge
    if judge.repeats > 1 and judge.repeat_when == "borderline":
        raise ShardError("judge.repeat_when: borderline cannot run sharded (which essays are "
                         "repeated depends on every model's cell means): use all or flagged, "
                         "or sharding: null")
    if judge.gold_criteria:
        raise ShardError("judge.gold_criteria cannot run sharded yet (the plan does not "
                         "carry the gold set's criteria): turn it off, or sharding: null")


def rubric_pins(config: BenchmarkConfig) -> dict[str, str]:
    """The fingerprints of the rubric and judge prompt this checkout would judge with."""
    scoring = load_scoring(config.judge)
    pins = {"rubric": f"{scoring.id}:{scoring.fingerprint}"}
    prompt = load_prompt_for(config.judge)
    if prompt is not None:
        pins["judge_prompt"] = prompt.fingerprint
    return pins


def check_pinned(plan: ShardPlan, index: int, digest: str | None) -> BenchmarkConfig:
    """The plan's config, once this shard has checked that the plan is the one its parent
    sent (``digest``) and that this checkout's code and rubrics are the plan's; a mismatch
    is one line naming what differs."""
    where = f"shard {index} of run {plan.run_id}"
    if digest is not None and digest != plan.digest:
        raise PlanMismatch(f"{where}: the plan under the parts store (digest {plan.digest}) "
                         f"is not the one the parent planned (digest {digest}); refusing to run")
    # The fingerprint says whether the code is the same (a commit of documentation moves
    # the version, an uncommitted edit may not); the version, what to deploy.
    if plan.code_fingerprint is not None:
        other = plan.code_fingerprint != code_fingerprint()
    else:  # a plan from before fingerprints
        other = plan.code_version is not None and plan.code_version != code_version()
    if other:
        raise PlanMismatch(f"{where}: this worker runs essaybench {code_version()} (code "
                         f"{code_fingerprint()}), the plan was made with {plan.code_version} "
                         f"(code {plan.code_fingerprint}); deploy the same code to every "
                         "worker (refusing to run)")
    config = BenchmarkConfig.model_validate(plan.config)
    if plan.pins:
        mine = rubric_pins(config)
        changed = sorted(k for k in {*mine, *plan.pins} if mine.get(k) != plan.pins.get(k))
        if changed:
            raise PlanMismatch(f"{where}: this worker's {', '.join(changed)} "
                             f"({', '.join(str(mine.get(k)) for k in changed)}) differ from "
                             f"the plan's ({', '.join(str(plan.pins.get(k)) for k in changed)});"
                             " refusing to run")
    return config


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


def run_shard(parts: PartStore, run_id: str, index: int, attempt: str | None = None,
              plan_digest: str | None = None,
              limits: LimiterFactory | None = None) -> dict[str, Any]:
    """Generate and judge shard ``index`` of ``run_id``; returns its ``_SUCCESS`` record.
    ``attempt``: this attempt's name (the shard's flow run id; default: a random one), in
    its heartbeat, part names and record. An attempt the parent has replaced (its
    ``owner`` names another) stops recording calls and writes nothing: ``ShardSuperseded``.
    ``plan_digest``: the digest of the plan the parent made (``ShardPlan.digest``); the
    shard refuses another plan, and a plan pinned to other code or rubric files
    (``check_pinned``), before any call. ``limits``: limiters every shard of the run
    shares (``llm.shared_limits``; the shard task passes Prefect's when the plan's
    ``sharding.limits`` is ``shared``), each entry's limits whole; None: each model's
    limits divided among the shards that may call it at once (``ShardPlan.sharing``)."""
    plan = read_plan(parts, run_id)
    assert plan is not None
    if not 0 <= index < len(plan.shards):
        raise ShardError(f"run {run_id} has shards 0–{len(plan.shards) - 1}, not {index}")
    config = check_pinned(plan, index, plan_digest)
    if shard_done(parts, run_id, index):
        done = parts.read_json(success_path(run_id, SHARD_STAGES[-1], index))
        return {**(done or {}), "already_done": True}
    shard = plan.shards[index]
    judges = config.judges()
    registry = Registry(models={
        n: ModelSpec.model_validate(s if limits is not None
                                    else shared_limits(s, plan.sharing(n, judges)))
        for n, s in plan.specs.items()})
    prompts = _shard_prompts(parts, plan, shard)
    scope = ReuseScope.of_run(run_id, plan.scope_runs, plan.scope_unattributed)
    ledger = PartLedger(parts, ledger_prefix(run_id, index), plan.seed, attempt=attempt)
    # Fencing: asked before each batch of calls and each group commit (llm.part_ledger).
    ledger.fence = lambda: superseded(parts, run_id, index, ledger.attempt)
    started = datetime.now(UTC)

    def beat() -> None:
        # Also the fence between batches (a long batch's group commits check it too).
        if superseded(parts, run_id, index, ledger.attempt):
            ledger.superseded.set()
            return
        if plan.liveness == "prefect":  # the flow run's own heartbeats show it alive
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
                             log_dir=Path(work) / "logs", ledger=ledger,
                             limits=limits or local_limiter) as session, \
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
        "judgments": judged.table.height, "parts": {}, "rows": {}, "sha256": {},
        # what the parent checks before it merges: every ledger part this attempt used
        "ledger": dict(sorted(ledger.hashes.items())),
        "meta": {"generate": essays.meta, "judge": judged.meta}}
    beat()  # a last look: a superseded attempt writes no part
    stop_if_superseded("as it finished")
    for stage, table in (("generate", essays.table), ("judge", judged.table)):
        rel = f"{part_prefix(run_id, stage, index)}/part-{ledger.attempt}.parquet"
        data = parquet_bytes(table)
        parts.write_bytes(rel, data)
        record["parts"][stage] = rel
        record["rows"][stage] = table.height
        record["sha256"][stage] = sha256_hex(data)
    for stage in SHARD_STAGES:  # judge last: its _SUCCESS is the shard's
        parts.put_json(success_path(run_id, stage, index), record)
    return record


def parquet_bytes(table: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    table.write_parquet(buffer)
    return buffer.getvalue()


def merge_ledgers(store: Store, parts: PartStore, plan: ShardPlan) -> dict[str, int]:
    """Append every shard's ledger parts to the store's ledger (idempotent); refuses while
    any shard has not succeeded, and (``verify_ledgers``) while a ledger part its
    ``_SUCCESS`` names is missing or differs from its recorded sha256.

    A call that both the successful attempt of a shard and an earlier attempt made (the
    earlier one was taken for dead while it still ran, or was killed after the call came
    back and before it was stored) was paid twice; the successful attempt's row is the one
    its parts used, so only that one is merged: the ledger then holds exactly what the
    shard wrote. The other rows are counted (``superseded``), not merged."""
    missing = [s.index for s in plan.shards if not shard_done(parts, plan.run_id, s.index)]
    if missing:
        raise ShardError(f"run {plan.run_id}: shard(s) {', '.join(map(str, missing))} of "
                         f"{len(plan.shards)} never succeeded; nothing merged")
    verified = verify_ledgers(parts, plan)
    frames: list[pl.DataFrame] = []
    n_parts = superseded = 0
    for shard in plan.shards:
        done = parts.read_json(success_path(plan.run_id, SHARD_STAGES[-1], shard.index)) or {}
        mine = f"part-{done.get('attempt')}-"
        rels = parts.list(ledger_prefix(plan.run_id, shard.index), ".parquet")
        n_parts += len(rels)
        won = [r for r in rels if r.rsplit("/", 1)[-1].startswith(mine)]
        lost = [r for r in rels if r not in won]
        winner = _ledger_rows(parts, won, verified)
        earlier = _ledger_rows(parts, lost, verified)
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


def verify_ledgers(parts: PartStore, plan: ShardPlan) -> dict[str, bytes]:
    """Every ledger part a shard's successful attempt used is there, byte for byte;
    returns their contents (read once)."""
    verified: dict[str, bytes] = {}
    for shard in plan.shards:
        done = parts.read_json(success_path(plan.run_id, SHARD_STAGES[-1], shard.index)) or {}
        hashes = done.get("ledger")
        if not isinstance(hashes, dict):
            raise ShardError(f"run {plan.run_id}: shard {shard.index}'s _SUCCESS.json records "
                             "no ledger parts (written by an older essaybench): remove it and "
                             "run the shard again")
        for rel, digest in hashes.items():
            if not parts.exists(rel):
                raise ShardError(f"run {plan.run_id}: shard {shard.index}'s ledger part "
                                 f"{parts.uri(rel)} is missing; nothing merged")
            data = parts.read_bytes(rel)
            if sha256_hex(data) != digest:
                raise ShardError(f"run {plan.run_id}: shard {shard.index}'s ledger part "
                                 f"{parts.uri(rel)} differs from the sha256 its _SUCCESS.json "
                                 "recorded; nothing merged")
            verified[rel] = data
    return verified


def _ledger_rows(parts: PartStore, rels: Sequence[str],
                 read: dict[str, bytes]) -> pl.DataFrame:
    frames = [as_ledger_frame(pl.read_parquet(io.BytesIO(read[r])) if r in read
                              else parts.read_parquet(r)) for r in rels]
    return pl.concat(frames) if frames else pl.DataFrame(schema=ROW_SCHEMA)


def stable_rows(table: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """``table`` without its volatile columns, sorted by ``keys``: two runs of the same
    calls give equal frames."""
    keep = [c for c in table.columns if not c.endswith(VOLATILE_SUFFIXES)]
    return table.select(keep).sort(list(keys))


ROW_KEYS = {"generate": ("prompt_id", "model", "sample_index"),
            "judge": ("prompt_id", "model", "sample_index", "judge")}


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

