"""``essaybench curate`` and ``essaybench promptset``: rebuild and inspect prompt sets.

``curate`` is a group: without a subcommand it runs the curation (``essaybench curate
[options]``, as it always did); ``essaybench curate review`` reviews what classification
left undecided (``cli.review``)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from essaybench.cli.common import (
    ConfigOpt,
    LockTimeoutOpt,
    StoreOpt,
    check_new_store,
    console,
    counts_table,
    prefect_env,
    reader,
)
from essaybench.cli.progress import progress_display
from essaybench.cli.review import review
from essaybench.core.errors import NotFoundError
from essaybench.core.settings import (
    DEFAULT_CURATE_CONFIG,
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_STORE_ROOT,
)
from essaybench.curate.funnel import CURATE_STAGES

if TYPE_CHECKING:
    from essaybench.store import Store

app = typer.Typer()
curate_app = typer.Typer(invoke_without_command=True, no_args_is_help=False)
promptset_app = typer.Typer(help="Inspect and export published prompt sets.",
                            no_args_is_help=True)
app.add_typer(curate_app, name="curate")
app.add_typer(promptset_app, name="promptset")
curate_app.command("review")(review)


FromStageOpt = Annotated[str, typer.Option(
    "--from-stage", help=f"Start at this stage: {', '.join(CURATE_STAGES)}.")]
BaseRunOpt = Annotated[str | None, typer.Option(
    "--run", help="With --from-stage: read upstream snapshots of this run.")]


@curate_app.callback()
def _curate_command(
    ctx: typer.Context,
    config: ConfigOpt = Path(DEFAULT_CURATE_CONFIG),
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    from_stage: FromStageOpt = "collect",
    base_run: BaseRunOpt = None,
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """Rebuild the prompt set from raw sources (or rerun from one stage).

    Review what classification left undecided with: essaybench curate review"""
    if ctx.invoked_subcommand is None:
        curate(config, store, from_stage, base_run, lock_timeout)
        return
    given = [param.opts[0] for param in ctx.command.params if param.name is not None
             and getattr(ctx.get_parameter_source(param.name), "name", "DEFAULT") != "DEFAULT"]
    if given:  # they would silently not apply to the subcommand
        raise typer.BadParameter(
            f"{', '.join(given)} given before {ctx.invoked_subcommand!r} applies to the "
            f"curation run, not to it; put the subcommand's options after its name "
            f"(essaybench curate {ctx.invoked_subcommand} --help)")


def curate(
    config: ConfigOpt = Path(DEFAULT_CURATE_CONFIG),
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    from_stage: FromStageOpt = "collect",
    base_run: BaseRunOpt = None,
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """Rebuild the prompt set (``essaybench curate`` without a subcommand; ``demo``)."""
    if from_stage not in CURATE_STAGES:
        raise typer.BadParameter(f"{from_stage!r}; choose one of {', '.join(CURATE_STAGES)}",
                                 param_hint="--from-stage")
    _check_curate_inputs(config, reader(store, lock_timeout), from_stage, base_run)
    check_new_store(store)
    prefect_env()
    from essaybench.flows.curate import curate_flow  # Prefect import is slow; only when needed

    started = time.perf_counter()
    stages = CURATE_STAGES[CURATE_STAGES.index(from_stage):]
    console.print(f"[bold]curate[/]: stages {' → '.join(stages)}; store {store}")
    with progress_display("starting Prefect and running the curation stages…"):
        summary = curate_flow(str(config), str(store.resolve()), from_stage, base_run,
                              lock_timeout_s=lock_timeout)
    print_curate_summary(summary, time.perf_counter() - started)


def _check_curate_inputs(config: Path, store: Store, from_stage: str,
                         base_run: str | None) -> None:
    """What the flow would stop at, found before Prefect starts (~13 s): the config, a
    raw source file that is not there, the upstream snapshot a later stage reads."""
    from essaybench.curate.config import load_curate_config
    from essaybench.sources.encoding import SourceReadError
    from essaybench.stages.curate import resolve_upstream

    curate_config = load_curate_config(config)
    if from_stage == "collect":
        sources = curate_config.load_sources()
        for spec in sources.sources:
            path = sources.resolve(spec)
            if not path.is_file():
                raise SourceReadError(f"{curate_config.sources}: source {spec.name!r}: raw "
                                      f"source file not found: {path}")
    else:
        resolve_upstream(store, from_stage, base_run)


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
    if f.get("personal_data"):
        shown = ", ".join(f"{kind} {n}" for kind, n in f["personal_data"].items())
        console.print(f"personal data replaced by placeholders in collect (records): {shown}",
                      markup=False)
    console.print(counts_table(summary["counts"], f"Prompt set {summary['version']}"))
    console.print(f"prompt set files: {summary['folder']}")
    console.print(f"done in {seconds:.1f} s")


def _prompt_set_record(store: Path, version: str, lock_timeout: float) -> dict[str, Any]:
    record = reader(store, lock_timeout).get_prompt_set(version)
    if record is None:
        raise typer.BadParameter(f"no prompt set {version!r} in {store}", param_hint="VERSION")
    return record


@promptset_app.command("show")
def promptset_show(version: str, store: StoreOpt = Path(DEFAULT_STORE_ROOT),
                   lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S) -> None:
    """Counts and funnel of a published prompt set. Reads only."""
    record = _prompt_set_record(store, version, lock_timeout)
    console.print(counts_table(record["counts"], f"Prompt set {version}"))
    console.print_json(json.dumps(record["funnel"]))
    console.print(f"files: {store / record['jsonl_path']}, {store / record['parquet_path']}")


@promptset_app.command("export")
def promptset_export(
    version: str,
    to: Annotated[Path, typer.Option("--to", help="Destination file (.jsonl or .parquet).")],
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """Copy a published prompt set to a JSONL or Parquet file (the store is only read)."""
    record = _prompt_set_record(store, version, lock_timeout)
    suffix = to.suffix.lower()
    if suffix not in (".jsonl", ".parquet"):
        raise typer.BadParameter("destination must end in .jsonl or .parquet", param_hint="--to")
    src = store / record["jsonl_path" if suffix == ".jsonl" else "parquet_path"]
    if not src.is_file():
        raise NotFoundError(f"prompt set {version} is in the catalog of {store} but its file "
                            f"is missing: {src}")
    if to.resolve() == src.resolve():
        raise typer.BadParameter(f"{to} is the store's own copy", param_hint="--to")
    if to.is_dir():
        raise typer.BadParameter(f"{to} is a folder; name the file to write",
                                 param_hint="--to")
    in_the_way = next((p for p in to.parents if p.exists() and not p.is_dir()), None)
    if in_the_way is not None:
        raise typer.BadParameter(f"cannot write {to}: {in_the_way} is a file, not a folder",
                                 param_hint="--to")
    try:
        to.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, to)
    except OSError as exc:  # a folder, a file in the way, no permission, disk full
        raise typer.BadParameter(f"cannot write {to}: {exc.strerror or exc}",
                                 param_hint="--to") from None
    console.print(f"wrote {to} ({record['n_prompts']} prompts)")
