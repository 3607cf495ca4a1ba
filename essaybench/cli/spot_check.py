"""``essaybench spot-check`` and its follow-ups: the weekly human spot check
(docs/weekly.md, Spot checks; ``essaybench.stages.spot_check``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from essaybench.cli.common import LockTimeoutOpt, RunOpt, StoreOpt, console, print_frame, reader
from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S, DEFAULT_STORE_ROOT

app = typer.Typer()


@app.command("spot-check")
def spot_check(
    run_id: RunOpt,
    n: Annotated[int, typer.Option("--n", min=1, help="Essays in the pack.")],
    seed: Annotated[int, typer.Option(help="Seed of the selection and the blind ids.")] = 0,
    judge: Annotated[str | None, typer.Option(
        help="The judge whose scores choose the items (default: the first by name).")] = None,
    out: Annotated[Path | None, typer.Option(
        help="Pack folder (default <store>/spotcheck/RUN/pack).")] = None,
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """A blind annotation pack of N essays of RUN: stratified by model × genre, flagged,
    judge-disagreement and borderline essays first; no model names, no judge scores."""
    from essaybench.bench.spot.sample import SampleParams
    from essaybench.stages.spot_check import make_pack

    written = make_pack(reader(store, lock_timeout), run_id, SampleParams(n=n, seed=seed),
                        judge=judge, folder=out)
    counts = written.items.group_by("priority").len().sort("priority")
    console.print(f"pack of {written.items.height} essays in {written.folder} (pack.csv, "
                  f"form.html); key (keep it) in {written.key_path}", markup=False)
    print_frame(counts, "items by priority")


@app.command("spot-check-import")
def spot_check_import(
    run_id: RunOpt,
    filled: Annotated[Path, typer.Option(help="The filled pack (CSV from the form or "
                                              "pack.csv filled in a spreadsheet).")],
    week: Annotated[str | None, typer.Option(
        help="The week this check counts for in the trend (default: the ISO week the run "
             "was judged, e.g. 2026-W49).")] = None,
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """Validate a filled pack, map it back to RUN's essays and compute this week's
    judge–human agreement (one row of the trend)."""
    from essaybench.stages.spot_check import import_filled

    imported, row = import_filled(reader(store, lock_timeout), run_id, filled, week)
    console.print(f"imported {imported.essays.height} essay scores "
                  f"({imported.questions.height} sub-question scores)", markup=False)
    print_frame(row, f"judge–human agreement, run {run_id}")


@app.command("spot-check-trend")
def spot_check_trend(
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
) -> None:
    """Judge–human agreement of every imported spot check, week by week."""
    from essaybench.bench.spot.trend import trend

    table = trend(store / "spotcheck")
    if table.is_empty():
        console.print(f"no spot check imported in {store}", markup=False)
        return
    print_frame(table, "judge–human agreement per week")


@app.command("spot-check-promote")
def spot_check_promote(
    run_id: RunOpt,
    gold: Annotated[Path, typer.Option(help="The gold-set folder (spot_gold.v<N>.jsonl).")],
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """RUN's accepted items (accept = yes) into the next gold-set version."""
    from essaybench.stages.spot_check import promote_accepted

    path, added = promote_accepted(reader(store, lock_timeout), run_id, gold)
    console.print(f"{path}: {added} new item(s)", markup=False)
