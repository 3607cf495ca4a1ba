"""``essaybench estimate``: what a run of a benchmark config will cost before any call,
and the same estimate ``run``/``rerun`` print (and check against ``max_cost_usd``)
before Prefect starts.

Reads only: the store's catalog and ledger through read-only connections, the config and
the registry; no model server is started and nothing is created or changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.table import Table

from essaybench.cli.common import BenchOpt, StoreOpt, console
from essaybench.cli.errors import fail
from essaybench.core.settings import DEFAULT_BENCHMARK_CONFIG, DEFAULT_STORE_ROOT
from essaybench.llm.progress import duration

if TYPE_CHECKING:
    from essaybench.bench.config import BenchmarkConfig
    from essaybench.bench.estimate_records import Estimate
    from essaybench.llm.registry import Registry

app = typer.Typer()

OVER_BUDGET_FLAG = "--yes-over-budget"


@app.command()
def estimate(
    config: BenchOpt = Path(DEFAULT_BENCHMARK_CONFIG),
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    check: Annotated[str | None, typer.Option(
        "--check", metavar="RUN",
        help="Compare the estimate (as it would have been made before RUN: the ledger's "
             "statistics without RUN's calls) with what RUN did, per model and stage.")] = None,
    history: Annotated[bool, typer.Option(
        "--history/--no-history",
        help="Use the ledger's statistics of earlier calls (--no-history: from the text "
             "alone, as on a fresh store).")] = True,
) -> None:
    """Calls, tokens, cost (USD) and wall time of a run of the config on the store's prompt
    set, per model and stage, before any call is made. Reads the store, changes nothing."""
    from essaybench.bench.estimate_records import EstimateError
    from essaybench.core.yamlio import YamlConfigError
    from essaybench.runs.estimate import EstimateInputError, estimate_run
    from essaybench.store import StoreBusyError

    bench, registry = _load(config)
    if check is not None:
        from essaybench.cli.estimate_check import print_check
        from essaybench.runs.estimate_check import check_run

        try:
            report = check_run(store, check, bench, registry, history=history)
        except (EstimateInputError, EstimateError, StoreBusyError, YamlConfigError) as exc:
            fail(str(exc))
        print_check(report, check)
        return
    try:
        result = estimate_run(store, bench, registry, history=history)
    except (EstimateInputError, EstimateError, StoreBusyError, YamlConfigError) as exc:
        fail(str(exc))
    print_estimate(result)
    if bench.sampling.mode == "adaptive":  # its maximum, minimum and expected figures
        from essaybench.runs.estimate_adaptive import adaptive_lines, estimate_adaptive

        try:
            adaptive = estimate_adaptive(store, bench, registry, history=history)
        except (EstimateInputError, EstimateError, StoreBusyError) as exc:
            fail(str(exc))
        for line in adaptive_lines(result, adaptive) if adaptive is not None else []:
            console.print(line, markup=False, soft_wrap=True)
    if bench.max_cost_usd is not None:
        _print_budget(result, bench.max_cost_usd, config,
                      over=f"run and rerun refuse it without {OVER_BUDGET_FLAG}")


def check_budget(config: Path, store: Path, *, from_stage: str, curating: bool,
                 over_budget_ok: bool, reusing: str | None = None) -> None:
    """What ``run`` and ``rerun`` do before Prefect starts (and before any call): print the
    estimate of the stages they will run; exit 2 with one line when it exceeds the config's
    ``max_cost_usd``, or when there is a cap but no estimate (unless ``over_budget_ok``).
    ``reusing``: the run whose successful calls will be served (a rerun's, --reuse-from)."""
    from essaybench.bench.estimate_records import EstimateError
    from essaybench.bench.pairwise.design import STAGE as PAIRWISE
    from essaybench.core.yamlio import YamlConfigError
    from essaybench.runs.estimate import STAGES_FROM, EstimateInputError, estimate_run
    from essaybench.store import StoreBusyError

    bench, registry = _load(config)
    stages = [s for s in STAGES_FROM[from_stage] if s != PAIRWISE or bench.pairwise is not None]
    if not stages:
        return  # no LLM call to pay for
    cap = bench.max_cost_usd
    try:
        result = estimate_run(store, bench, registry, stages=stages, adaptive_cap=True)
    except (EstimateError, YamlConfigError) as exc:  # the run would fail on it too
        fail(str(exc))
    except (EstimateInputError, StoreBusyError) as exc:
        if cap is not None and not over_budget_ok:
            fail(f"max_cost_usd in {config} cannot be checked, there is no estimate ({exc}); "
                 f"pass {OVER_BUDGET_FLAG} to run anyway")
        console.print(f"no estimate: {exc}", markup=False)
        return
    notes: list[str] = []
    if curating and bench.prompt_set == "latest":
        notes.append("the run curates first: estimated on the newest published prompt set "
                     "(a rebuilt one may differ); curation's classification calls are not "
                     "counted")
    if reusing is not None:
        notes.append(f"an upper bound: the calls run {reusing} (and the runs it continues) "
                     "already paid for are served from the ledger, not sent again")
    print_estimate(result, notes)
    if cap is not None:
        _print_budget(result, cap, config,
                      over=f"going on ({OVER_BUDGET_FLAG})" if over_budget_ok else None)


def _load(config: Path) -> tuple[BenchmarkConfig, Registry]:
    """The benchmark config and the registry the pipeline would load, or a one-line error."""
    from essaybench.bench.config import load_benchmark_config
    from essaybench.core.yamlio import YamlConfigError
    from essaybench.llm.registry import load_registry

    try:
        return load_benchmark_config(config), load_registry()
    except YamlConfigError as exc:
        fail(str(exc))


def _print_budget(result: Estimate, cap: float, config: Path, *, over: str | None) -> None:
    """Over budget: exit 2 with one line when ``over`` is None, else print ``over`` after
    the reason (``estimate`` only reports; ``--yes-over-budget`` goes on)."""
    from essaybench.bench.budget import budget_problem, format_usd

    problem = budget_problem(result, cap)
    # soft_wrap: one line however narrow the terminal (it wraps the line itself), so the
    # config's path is never broken in two.
    if problem is None:
        console.print(f"within max_cost_usd {format_usd(cap)} ({config})", markup=False,
                      soft_wrap=True)
    elif over is None:
        fail(f"{problem} ({config}); raise it, or pass {OVER_BUDGET_FLAG} to run anyway")
    else:
        console.print(f"{problem} ({config}): {over}", markup=False, soft_wrap=True)


def print_estimate(result: Estimate, notes: Sequence[str] = ()) -> None:
    from essaybench.bench.budget import format_usd

    table = Table(title=f"Estimate before any call: {result.n_prompts} prompts of "
                        f"{result.prompt_set}", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)  # fits 80 columns; rich folds long model names
    table.add_column("model", overflow="fold")
    table.add_column("stage", no_wrap=True)
    for name in ("calls", "in tok", "out tok", "USD", "wall ≥/~"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("by", no_wrap=True)  # the binding bound: concurrency, rpm or tpm
    table.add_column("tokens", no_wrap=True)  # from the ledger, or assumed
    for r in result.rows:
        table.add_row(r.model, r.stage, f"{r.calls:,}", format_tokens(r.input_tokens),
                      format_tokens(r.output_tokens), format_usd(r.cost_usd),
                      f"{duration(r.lower_s)}/{duration(r.wall_s)}",
                      r.binding.replace("concurrency", "conc"), r.tokens_from)
    table.add_section()
    table.add_row("total", "", f"{result.calls:,}", format_tokens(result.input_tokens),
                  format_tokens(result.output_tokens), format_usd(result.cost_usd),
                  f"{duration(result.lower_s)}/{duration(result.wall_s)}", "", "",
                  style="bold")
    console.print(table)
    console.print(f"wall time: at least {duration(result.lower_s)} (lower bound), about "
                  f"{duration(result.wall_s)} expected", markup=False)
    console.print("Assumptions:", markup=False)
    for note in (*notes, *result.assumptions):
        console.print(f"  - {note}", markup=False)


def format_tokens(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.1f}M"
    return f"{value / 1e3:.1f}k" if value >= 1e4 else f"{value:,.0f}"

