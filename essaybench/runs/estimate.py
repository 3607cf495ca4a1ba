"""A benchmark run's estimate from the store: the prompts it would select and the token
statistics of recent ledger calls, read without changing anything (read-only DuckDB
connections, no file created; see ``store.readonly``) and without a single LLM call.

The arithmetic is :mod:`essaybench.bench.estimate`'s; ``essaybench estimate`` prints the
result, and ``essaybench run``/``rerun`` print it first and refuse above the config's
``max_cost_usd``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import duckdb
import polars as pl

from essaybench.bench.adaptive_scores import adaptive_prefix
from essaybench.bench.budget import budget_problem, format_usd
from essaybench.bench.config import BenchmarkConfig, select_prompts
from essaybench.bench.estimate import ESTIMATED_STAGES, estimate_benchmark
from essaybench.bench.estimate_records import Estimate, TokenStats
from essaybench.core.errors import NotFoundError, UserError
from essaybench.core.sql import statement
from essaybench.llm.registry import Registry
from essaybench.llm.session import LEDGER_FILE
from essaybench.store import Store, StoreBusyError
from essaybench.store.readonly import read_only

RECENT_CALLS = 1000  # ledger statistics: the newest ok calls per (model, stage)

# The LLM stages a pipeline started at a benchmark stage runs (pairwise when configured).
STAGES_FROM = {"generate": ESTIMATED_STAGES, "judge": ESTIMATED_STAGES[1:],
               "aggregate": ("pairwise",)}


class EstimateInputError(NotFoundError):
    """What an estimate needs is not in the store: the message names what and where."""


def read_prompt_set(store_root: Path | str, version: str) -> tuple[str, pl.DataFrame]:
    """(version, every prompt of it); ``version`` may be 'latest'."""
    store = Store(store_root)  # only its paths: Store() itself touches nothing
    if not store.root.is_dir():
        raise EstimateInputError(f"no store at {store.root}")
    hint = "run essaybench curate"
    try:
        with read_only(store.catalog_path, store.catalog_path.with_suffix(".lock"),
                       "catalog") as con:
            if version == "latest":
                latest = con.execute(statement("latest_prompt_set")).fetchone()
                if latest is None:
                    raise EstimateInputError(f"no prompt set published in {store.root}: {hint}")
                version = str(latest[0])
            cursor = con.execute(statement("get_prompt_set"), {"version": version})
            names = [d[0] for d in cursor.description or []]
            row = cursor.fetchone()
    except FileNotFoundError:
        raise EstimateInputError(f"no catalog in {store.root} (not a store?): {hint}") from None
    except duckdb.CatalogException:  # a catalog from before prompt sets were published
        raise EstimateInputError(f"no prompt set published in {store.root}: {hint}") from None
    if row is None:
        raise EstimateInputError(f"prompt set {version!r} is not in {store.root}")
    path = store.root / str(dict(zip(names, row, strict=True))["parquet_path"])
    if not path.is_file():
        raise EstimateInputError(f"prompt set {version} is in the catalog but its file is "
                                 f"missing: {path}")
    return version, pl.read_parquet(path)


def read_token_stats(store_root: Path | str, recent: int = RECENT_CALLS, *,
                     exclude_run: str = "") -> tuple[dict[tuple[str, str], TokenStats], str | None]:
    """Ledger statistics per (model, stage), without the calls of ``exclude_run``, and why
    there are none when the ledger could not be read (None when it has no calls yet)."""
    path = Path(store_root) / LEDGER_FILE
    try:
        # wait_s=0: a running pipeline holds the ledger for hours; estimate without it.
        with read_only(path, path.with_suffix(".lock"), "call ledger", wait_s=0) as con:
            rows = con.execute(statement("ledger_token_stats"),
                               {"recent": recent, "exclude": exclude_run}).fetchall()
    except FileNotFoundError:
        return {}, None
    except StoreBusyError as exc:
        return {}, f"ledger statistics not read ({exc}): every token count is assumed"
    except duckdb.CatalogException:  # a ledger file without its table
        return {}, None
    return {(str(model), str(stage)): TokenStats(
        int(n), float(mean_in), float(mean_out), None if latency is None else float(latency),
        None if fastest is None else float(fastest))
        for model, stage, n, mean_in, mean_out, latency, fastest in rows}, None


def estimate_run(store_root: Path | str, config: BenchmarkConfig, registry: Registry, *,
                 stages: Sequence[str] = ESTIMATED_STAGES, history: bool = True,
                 exclude_run: str = "", prompt_set: str | None = None,
                 adaptive_cap: bool = False,
                 prompt_ids: Sequence[str] | None = None) -> Estimate:
    """The estimate of a run of ``config`` over its prompt set in ``store_root`` (or
    ``prompt_set``); ``history`` False: every count from the text, none from the ledger;
    ``exclude_run``: the ledger's statistics without that run's calls; ``adaptive_cap``:
    for ``sampling: adaptive``, the most the run can ask for (its ``max_prompts`` and
    ``max_calls``: what a budget is checked against) rather than every selected prompt;
    ``prompt_ids``: only these of the selection (the prompts an adaptive run sampled)."""
    version, prompts = read_prompt_set(store_root, prompt_set or config.prompt_set)
    selected = select_prompts(prompts, config.per_genre, config.sample_seed, config.genres)
    if prompt_ids is not None:
        of = selected.height
        selected = selected.filter(pl.col("prompt_id").is_in(list(prompt_ids)))
        capped = [f"the {selected.height} of these {of} prompts the run sampled"]
    elif adaptive_cap and config.sampling.mode == "adaptive":
        of = selected.height
        selected = adaptive_prefix(selected, config)
        capped = [f"adaptive sampling: at most {selected.height} of these {of} prompts "
                  "(sampling.max_prompts, max_calls); it stops earlier once every question "
                  "is decided (essaybench estimate shows the expected figure)"]
    else:
        capped = []
    stats, unread = (read_token_stats(store_root, exclude_run=exclude_run) if history
                     else ({}, None))
    estimate = estimate_benchmark(selected, config, registry, stats, prompt_set=version,
                                  stages=stages)
    sample = ("every prompt" if config.per_genre is None else
              f"{config.per_genre} per genre, seed {config.sample_seed}")
    notes = [f"prompt set {version}: {selected.height} of {prompts.height} prompts ({sample})"]
    if unread is not None:
        notes.append(unread)
    return dataclasses.replace(estimate, assumptions=(*notes, *capped, *estimate.assumptions))


class OverBudget(UserError, RuntimeError):
    """A run whose estimate exceeds its config's ``max_cost_usd``: refused before any call."""


def require_within_budget(store_root: Path | str, config: BenchmarkConfig,
                          registry: Registry, from_stage: str) -> Estimate | None:
    """The budget check a run makes itself (a scheduled run has no CLI in front of it),
    after curation and before the first call: the estimate of the stages it will run, or
    :class:`OverBudget` naming the cost and the cap. No cap: nothing to check (None)."""
    cap = config.max_cost_usd
    stages = [s for s in STAGES_FROM[from_stage] if s != "pairwise" or config.pairwise]
    if cap is None or not stages:
        return None
    try:
        estimate = estimate_run(store_root, config, registry, stages=stages,
                                adaptive_cap=True)
    except EstimateInputError as exc:
        raise OverBudget(f"max_cost_usd {format_usd(cap)} cannot be checked, there is no "
                         f"estimate ({exc})") from None
    problem = budget_problem(estimate, cap)
    if problem is not None:
        raise OverBudget(f"{problem}: the run was refused before any call (raise "
                         "max_cost_usd in the config, or run it from the CLI with "
                         "--yes-over-budget)")
    return estimate

