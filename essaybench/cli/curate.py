"""``essaybench curate`` and ``essaybench promptset``: rebuild and inspect prompt sets."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from essaybench.cli.common import ConfigOpt, StoreOpt, console, counts_table, prefect_env
from essaybench.core.settings import DEFAULT_CURATE_CONFIG, DEFAULT_STORE_ROOT
from essaybench.curate.funnel import CURATE_STAGES

app = typer.Typer()
promptset_app = typer.Typer(help="Inspect and export published prompt sets.",
                            no_args_is_help=True)
app.add_typer(promptset_app, name="promptset")


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
