"""``essaybench gold``: gold sets (reference answers and acceptance criteria by prompt
id) attached to a published prompt set (docs/weekly.md, Gold items;
``essaybench.stages.gold``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import polars as pl
import typer

from essaybench.cli.common import LockTimeoutOpt, StoreOpt, console, print_frame, reader
from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S, DEFAULT_STORE_ROOT

app = typer.Typer(help="Gold sets of a prompt set: attach, list.", no_args_is_help=True)


@app.command()
def attach(
    file: Annotated[Path, typer.Argument(
        help="A gold YAML file, or a promoted spot check (spot_gold.v<N>.jsonl).")],
    prompt_set: Annotated[str, typer.Option(
        help="The published prompt-set version to attach it to.")] = "latest",
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """Attach a gold file to a published prompt set (prompt ids checked).

    Stored content-hashed with the set's version: the same content again changes nothing,
    the same version with other content is refused. Runs on that prompt set use the
    newest attached set (a rerun: the one its run used) for the reference figures and,
    with judge.gold_criteria, for the acceptance criteria in the judge calls."""
    from essaybench.stages.gold import attach_gold_file
    from essaybench.store import Store

    reader(store, lock_timeout).latest_prompt_set_version()  # an existing store, or exit 2
    gold, added = attach_gold_file(Store(store, lock_timeout), file, prompt_set)
    rec = gold.record
    state = "attached" if added else "already attached (same content)"
    console.print(f"gold set {rec.version} ({rec.n_items} items, {rec.n_criteria} with "
                  f"criteria, sha256 {rec.sha256[:12]}) {state} to prompt set "
                  f"{rec.prompt_set_version}", markup=False)


@app.command("list")
def list_(
    prompt_set: Annotated[str | None, typer.Option(
        help="Only this prompt-set version's sets.")] = None,
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """The gold sets attached to each prompt set, newest first."""
    from essaybench.store.gold_sets import gold_sets

    records = gold_sets(reader(store, lock_timeout), prompt_set)
    if not records:
        console.print(f"no gold set attached in {store}", markup=False)
        return
    print_frame(pl.DataFrame([{
        "prompt_set": r.prompt_set_version, "version": r.version, "sha256": r.sha256[:8],
        "items": r.n_items, "criteria": r.n_criteria,
        "attached": r.created_at.strftime("%Y-%m-%d") if r.created_at else ""}
        for r in records]), "gold sets")
