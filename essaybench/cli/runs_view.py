"""``essaybench runs``: the catalog's stage runs, grouped by run, readable at 80 columns.

A run id (23 characters) is what a user copies into ``rerun --run``, so it never shares
a table cell that could wrap: each run gets a heading line with its whole id (and, from
the ``runs`` table, what it reran or reused), then a compact table of its stages, then
the first line of each stage's error on a line of its own.
"""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from essaybench.bench.health import RunHealth, health_of_meta
from essaybench.store import StageRun, Store
from essaybench.store.runs import RunRecord, get_runs


def _heading(run_id: str, record: RunRecord | None) -> list[Text]:
    """The run's whole id on a line of its own; what it reran or reused on the next."""
    heading = Text("run ", style="bold")
    heading.append(run_id, style="bold cyan")
    if record is None:
        return [heading]
    facts = []
    if record.kind == "rerun":
        facts.append(f"rerun of {record.base_run} from {record.from_stage}")
    if record.reuse_from is not None:
        facts.append(f"reuses {record.reuse_from}")
    if record.config_path is not None:
        sha = f" ({record.config_sha256[:8]})" if record.config_sha256 else ""
        facts.append(f"config {record.config_path}{sha}")
    return [heading, *([Text("  " + "; ".join(facts), style="dim")] if facts else [])]


def _stages_table(stage_runs: list[StageRun]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("stage")
    table.add_column("status")
    table.add_column("snapshot", no_wrap=True)
    table.add_column("in→kept", justify="right")
    table.add_column("started", no_wrap=True)
    for r in stage_runs:
        kept = "" if r.rows_out is None else str(r.rows_out)
        rows = "" if r.rows_in is None else f"{r.rows_in}→{kept}"
        table.add_row(r.stage, r.status, r.snapshot_id or "", rows,
                      f"{r.started_at:%m-%d %H:%M}")
    return table


def _health(stage_runs: list[StageRun]) -> RunHealth | None:
    """The health the run's newest successful aggregate recorded (issue 12, item 2)."""
    return next((health_of_meta(r.meta) for r in stage_runs
                 if r.stage == "aggregate" and r.status == "ok"), None)


def print_runs(console: Console, store: Store, run_id: str | None, limit: int) -> None:
    """Newest first: up to ``limit`` stage runs (of ``run_id`` only, when given)."""
    stage_runs = store.stage_runs(run_id, limit)
    if not stage_runs:
        console.print(f"no stage runs in {store.root}" + (f" for run {run_id}" if run_id else ""))
        return
    by_run: dict[str, list[StageRun]] = {}
    for r in stage_runs:
        by_run.setdefault(r.run_id, []).append(r)
    records = get_runs(store, list(by_run))
    console.print(f"Stage runs in {store.root}, newest first", style="bold")
    for rid, runs in by_run.items():
        console.print()
        for line in _heading(rid, records.get(rid)):
            console.print(line)
        console.print(_stages_table(runs))
        for r in runs:
            if r.error:
                console.print(Text(f"  {r.stage}: {r.error.splitlines()[0]}", style="red"))
        health = _health(runs)
        if health is not None:  # the stage rows say ok; whether the run counts is here
            console.print(Text(f"  {health.summary()}", style="green" if health.ok else "red"))
