"""The ``essaybench`` command line: runs the same Prefect flows a deployment runs."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from essaybench.curate.funnel import CURATE_STAGES
from essaybench.settings import (
    DEFAULT_BENCHMARK_CONFIG,
    DEFAULT_CURATE_CONFIG,
    DEFAULT_STORE_ROOT,
)

app = typer.Typer(help="essaybench: benchmark LLMs on Chinese essay writing.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
promptset_app = typer.Typer(help="Inspect and export published prompt sets.",
                            no_args_is_help=True)
app.add_typer(promptset_app, name="promptset")
llm_app = typer.Typer(help="The LLM gateway: models, usage and cost.", no_args_is_help=True)
app.add_typer(llm_app, name="llm")
console = Console()

ConfigOpt = Annotated[Path, typer.Option("--config", help="Curate config (YAML).")]
StoreOpt = Annotated[Path, typer.Option("--store", help="Store folder (catalog + snapshots).")]


def prefect_env() -> None:
    # No network here or on most CI machines: keep Prefect from phoning home.
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    # The ephemeral API server's 20 s default start-up budget is too tight on a loaded
    # 2-core machine (measured: it timed out at load average 5).
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


@app.command()
def curate(
    config: ConfigOpt = Path(DEFAULT_CURATE_CONFIG),
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    from_stage: Annotated[str, typer.Option(
        "--from-stage", help=f"Start at this stage: {', '.join(CURATE_STAGES)}.")] = "collect",
    base_run: Annotated[str | None, typer.Option(
        "--run", help="With --from-stage: read upstream snapshots of this run.")] = None,
) -> None:
    """Rebuild the prompt set from raw sources (or rerun from one stage)."""
    if from_stage not in CURATE_STAGES:
        raise typer.BadParameter(f"{from_stage!r}; choose one of {', '.join(CURATE_STAGES)}",
                                 param_hint="--from-stage")
    prefect_env()
    from flows.curate import curate_flow  # Prefect import is slow; only when needed

    started = time.perf_counter()
    stages = CURATE_STAGES[CURATE_STAGES.index(from_stage):]
    console.print(f"[bold]curate[/]: stages {' → '.join(stages)}; store {store}")
    with console.status("starting Prefect and running the curation stages…"):
        summary = curate_flow(str(config), str(store.resolve()), from_stage, base_run)
    print_curate_summary(summary, time.perf_counter() - started)


def print_curate_summary(summary: dict[str, Any], seconds: float) -> None:
    funnel = Table(title=f"Funnel (run {summary['run_id']})")
    funnel.add_column("step")
    funnel.add_column("removed", justify="right")
    funnel.add_column("remaining", justify="right")
    for step, removed, remaining in summary["steps"]:
        funnel.add_row(step, str(removed) if removed else "", str(remaining))
    console.print(funnel)
    f = summary["funnel"]
    console.print(
        f"raw {f['raw']} = final {f['final']} + filtered {f['filtered']} + quarantined "
        f"{f['quarantined']} + duplicates {f['duplicates']} + unclassified {f['unclassified']}"
        f" → {'balanced' if f['balanced'] else '[red]NOT BALANCED[/]'}")
    console.print(counts_table(summary["counts"], f"Prompt set {summary['version']}"))
    console.print(f"prompt set files: {summary['folder']}")
    console.print(f"done in {seconds:.1f} s")


def counts_table(counts: dict[str, dict[str, int]], title: str) -> Table:
    table = Table(title=title)
    for col in ("genre", "open", "constrained", "total"):
        table.add_column(col, justify="left" if col == "genre" else "right")
    for genre, row in counts.items():
        table.add_row(genre, *(str(row.get(c, 0)) for c in ("open", "constrained", "total")),
                      style="bold" if genre == "total" else None)
    return table


BenchOpt = Annotated[Path, typer.Option("--config", help="Benchmark config (YAML).")]


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
    from essaybench.benchmark import BENCHMARK_STAGES

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

        from essaybench.cli_analysis import print_frame

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


def _prompt_set_record(store: Path, version: str) -> dict[str, Any]:
    from essaybench.store import Store

    record = Store(store).get_prompt_set(version)
    if record is None:
        raise typer.BadParameter(f"no prompt set {version!r} in {store}", param_hint="VERSION")
    return record


@promptset_app.command("show")
def promptset_show(version: str, store: StoreOpt = Path(DEFAULT_STORE_ROOT)) -> None:
    """Counts and funnel of a published prompt set."""
    record = _prompt_set_record(store, version)
    console.print(counts_table(record["counts"], f"Prompt set {version}"))
    console.print_json(json.dumps(record["funnel"]))
    console.print(f"files: {store / record['jsonl_path']}, {store / record['parquet_path']}")


@promptset_app.command("export")
def promptset_export(
    version: str,
    to: Annotated[Path, typer.Option("--to", help="Destination file (.jsonl or .parquet).")],
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
) -> None:
    """Copy a published prompt set to a JSONL or Parquet file."""
    record = _prompt_set_record(store, version)
    suffix = to.suffix.lower()
    if suffix not in (".jsonl", ".parquet"):
        raise typer.BadParameter("destination must end in .jsonl or .parquet", param_hint="--to")
    src = store / record["jsonl_path" if suffix == ".jsonl" else "parquet_path"]
    to.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, to)
    console.print(f"wrote {to} ({record['n_prompts']} prompts)")


@llm_app.command("usage")
def llm_usage(
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    stage: Annotated[str | None, typer.Option(help="Only this stage.")] = None,
    markdown: Annotated[bool, typer.Option(help="Print Markdown instead of a table.")] = False,
) -> None:
    """Calls, statuses, tokens, cost and latency per model and stage, from the ledger."""
    from essaybench.llm.accounting import CallRecord, render_markdown, render_rich, summarize
    from essaybench.llm.ledger import Ledger
    from essaybench.llm.session import LEDGER_FILE
    from essaybench.sql import statement

    path = store / LEDGER_FILE
    if not path.is_file():
        raise typer.BadParameter(f"no ledger at {path}: no LLM call has been made yet",
                                 param_hint="--store")
    with Ledger(path) as ledger:
        rows = ledger.query(statement("ledger_calls_for_accounting"), {"stage": stage})
    summaries = summarize(CallRecord.from_row(r) for r in rows)
    if markdown:
        console.print(render_markdown(summaries), markup=False)
    else:
        console.print(render_rich(summaries, f"LLM calls in {path}"))


@llm_app.command("models")
def llm_models(
    models_file: Annotated[Path | None, typer.Option(
        "--models", help="Registry YAML (default: $ESSAYBENCH_MODELS or configs/models.yaml)."
    )] = None,
) -> None:
    """The model registry: endpoints, limits, prices (never keys)."""
    from essaybench.llm.registry import load_registry

    registry = load_registry(models_file)
    table = Table(title="Models")
    table.add_column("name", no_wrap=True)
    for col in ("on", "endpoint / model id", "key from", "conc / rpm / tpm", "$/Mtok in/out"):
        table.add_column(col)
    for name in registry.names():
        m = registry.get(name)
        table.add_row(name, "yes" if m.enabled else "no", f"{m.base_url}\n{m.model_id}",
                      f"${m.api_key_env}" if m.api_key_env else "-",
                      f"{m.max_concurrency} / {m.rpm or '-'} / {m.tpm or '-'}",
                      f"{m.price_input_per_mtok} / {m.price_output_per_mtok}")
    console.print(table)


# The analysis commands (pairwise, stats, agreement, wpb-report, sample-size) register
# themselves on ``app``; imported last because they import from this module.
from essaybench import cli_analysis  # noqa: E402

__all__ = ["app", "cli_analysis"]

if __name__ == "__main__":
    app()
