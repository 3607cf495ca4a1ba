"""``essaybench run``, ``rerun``, ``demo`` and ``runs``: the weekly benchmark and its catalog."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from essaybench.cli.common import BenchOpt, StoreOpt, console, prefect_env, print_frame
from essaybench.cli.curate import curate
from essaybench.core.settings import (
    DEFAULT_BENCHMARK_CONFIG,
    DEFAULT_CURATE_CONFIG,
    DEFAULT_STORE_ROOT,
)

app = typer.Typer()


@app.command()
def run(
    config: BenchOpt = Path(DEFAULT_BENCHMARK_CONFIG),
    curate_config: Annotated[Path, typer.Option(help="Curate config (YAML).")] = Path(
        DEFAULT_CURATE_CONFIG),
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    curate_first: Annotated[bool, typer.Option(
        "--curate/--no-curate", help="Rebuild the prompt set first.")] = True,
) -> None:
    """The benchmark: (curate →) generate → judge → aggregate; prints Table 5."""
    prefect_env()
    from flows.pipeline import pipeline_flow

    started = time.perf_counter()
    with console.status("generating and judging (the embedded model is slow: minutes)…"):
        result = pipeline_flow(str(config), str(curate_config), str(store.resolve()),
                               curate_first)
    _print_reports(result, time.perf_counter() - started)


@app.command()
def rerun(
    run_id: Annotated[str, typer.Option("--run", help="The run whose snapshots to start from.")],
    stage: Annotated[str, typer.Option(help="generate, judge or aggregate.")],
    config: BenchOpt = Path(DEFAULT_BENCHMARK_CONFIG),
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
) -> None:
    """Rerun one benchmark stage (and those after it) from an earlier run's upstream
    snapshot; calls that already succeeded are served from the ledger, not re-sent."""
    from essaybench.stages.pipeline import BENCHMARK_STAGES

    if stage not in BENCHMARK_STAGES:
        raise typer.BadParameter(f"{stage!r}; choose one of {', '.join(BENCHMARK_STAGES)}",
                                 param_hint="--stage")
    prefect_env()
    from flows.pipeline import pipeline_flow

    started = time.perf_counter()
    with console.status(f"rerunning from {stage}…"):
        result = pipeline_flow(str(config), DEFAULT_CURATE_CONFIG, str(store.resolve()),
                               False, stage, run_id)
    _print_reports(result, time.perf_counter() - started)


def _print_reports(result: dict[str, Any], seconds: float) -> None:
    reports = Path(result["reports"])
    table5 = reports / "table5_weighted.md"
    if table5.is_file():
        console.print(table5.read_text(encoding="utf-8"), markup=False)
    cis = reports / "stats" / "score_ci_weighted.parquet"
    if cis.is_file():
        import polars as pl

        overall = pl.read_parquet(cis).filter(pl.col("cell") == "overall")
        print_frame(overall.select("judge", "model", "mean", "ci_lo", "ci_hi", "n"),
                    "Overall weighted score, 95% bootstrap CI (prompts resampled, paired)")
    console.print(f"run {result['run_id']}: reports in {reports} (Table 5 weighted and w/o WT, "
                  f"trait means, length compliance, stats/: CIs, rankings, bias; .md .csv "
                  f".parquet); {seconds:.1f} s")


@app.command()
def demo(store: StoreOpt = Path(DEFAULT_STORE_ROOT)) -> None:
    """The main job on the embedded defaults: rebuild the prompt set from the bundled
    sources, then generate and judge one prompt per genre with the embedded model."""
    curate(config=Path(DEFAULT_CURATE_CONFIG), store=store, from_stage="collect", base_run=None)
    run(config=Path(DEFAULT_BENCHMARK_CONFIG), curate_config=Path(DEFAULT_CURATE_CONFIG),
        store=store, curate_first=False)
    console.print(f"store (catalog, snapshots, ledger): {store}; list runs with: essaybench runs")


@app.command()
def runs(
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    run_id: Annotated[str | None, typer.Option("--run", help="Only this run.")] = None,
    limit: int = 50,
) -> None:
    """List stage runs in the catalog, newest first."""
    from essaybench.store import Store

    table = Table(title=f"Stage runs in {store}")
    for col in ("run", "stage", "status", "snapshot", "in", "kept", "started", "error"):
        table.add_column(col)
    for r in Store(store).stage_runs(run_id, limit):
        table.add_row(r.run_id, r.stage, r.status, r.snapshot_id or "", str(r.rows_in or ""),
                      str(r.rows_out if r.rows_out is not None else ""),
                      f"{r.started_at:%Y-%m-%d %H:%M:%S}",
                      (r.error or "").splitlines()[0] if r.error else "")
    console.print(table)
