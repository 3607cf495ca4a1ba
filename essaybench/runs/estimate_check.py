"""What a run did, per model and stage, read from the ledger (read-only, no file created),
and the estimate ``essaybench estimate --check RUN`` compares it with: the one that would
have been printed before the run (the ledger's statistics without the run's own calls, or
none with ``history=False``), on the prompt set the run used."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.estimate_check import Actual, CheckReport, compare
from essaybench.core.sql import statement
from essaybench.llm.registry import Registry
from essaybench.llm.session import LEDGER_FILE
from essaybench.runs.estimate import EstimateInputError, estimate_run
from essaybench.store import Store
from essaybench.store.readonly import read_only


def read_run_calls(store_root: Path | str, run_id: str) -> tuple[list[Actual], float | None]:
    """Per (model, stage) what run ``run_id`` paid for, and its wall time (first call's
    start to last call's end); EstimateInputError when the ledger has no call of it."""
    path = Path(store_root) / LEDGER_FILE
    try:
        with read_only(path, path.with_suffix(".lock"), "call ledger", wait_s=0) as con:
            rows = con.execute(statement("ledger_run_actuals"), {"run_id": run_id}).fetchall()
    except (FileNotFoundError, duckdb.CatalogException):
        raise EstimateInputError(f"no call ledger in {store_root}: run {run_id!r} made no "
                                 "call there") from None
    if not rows:
        raise EstimateInputError(f"run {run_id!r} has no calls in the ledger of {store_root}")
    actual = [Actual(str(model), str(stage), int(calls), float(tin), float(tout),
                     None if unpriced else float(cost), float(wall or 0.0))
              for model, stage, calls, tin, tout, cost, unpriced, wall, _, _ in rows]
    starts = [r[8] for r in rows if r[8] is not None]
    ends = [r[9] for r in rows if r[9] is not None]
    wall = (max(ends) - min(starts)).total_seconds() if starts and ends else None
    return actual, wall


def _stage_runs(store: Store, run_id: str) -> list[tuple[Any, ...]] | None:
    """Run ``run_id``'s stage runs, newest first, read without the catalog's write lock
    (None: no catalog to read)."""
    try:
        with read_only(store.catalog_path, store.catalog_path.with_suffix(".lock"),
                       "catalog", wait_s=0) as con:
            return con.execute(statement("find_stage_runs"),
                               {"run_id": run_id, "snapshot_id": None}).fetchall()
    except (FileNotFoundError, duckdb.Error):
        return None


def run_prompt_ids(store_root: Path | str, run_id: str) -> list[str] | None:
    """The prompts of the essays run ``run_id``'s newest ok generate stage wrote (None:
    none recorded), read from its snapshot file without the catalog's write lock."""
    store = Store(store_root)
    rows = _stage_runs(store, run_id)
    if rows is None:
        return None
    for _, stage, status, snapshot_id, _, _, _ in rows:  # newest first
        path = store.root / "snapshots" / "generate" / f"{snapshot_id}.parquet"
        if stage == "generate" and status == "ok" and path.is_file():
            return sorted(set(pl.read_parquet(path, columns=["prompt_id"])["prompt_id"]))
    return None


def run_prompt_set(store_root: Path | str, run_id: str) -> str | None:
    """The prompt set version run ``run_id``'s generate stage read (None: not recorded)."""
    store = Store(store_root)
    rows = _stage_runs(store, run_id)
    if rows is None:
        return None
    for _, stage, _, _, _, params, _ in rows:
        if stage == "generate" and params:
            version = (json.loads(params) if isinstance(params, str) else params).get(
                "prompt_set")
            if version:
                return str(version)
    return None


def check_run(store_root: Path | str, run_id: str, config: BenchmarkConfig,
              registry: Registry, *, history: bool = True) -> CheckReport:
    actual, wall = read_run_calls(store_root, run_id)
    stages = tuple(dict.fromkeys(a.stage for a in actual))
    sampled = (run_prompt_ids(store_root, run_id) if config.sampling.mode == "adaptive"
               else None)  # an adaptive run asked for some prompts only
    estimate = estimate_run(store_root, config, registry, history=history,
                            exclude_run=run_id, prompt_set=run_prompt_set(store_root, run_id),
                            stages=[s for s in ("generate", "judge", "drift", "pairwise")
                                    if s in stages], prompt_ids=sampled)
    return compare(estimate, actual, wall)
