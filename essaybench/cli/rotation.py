"""``essaybench rotation``: which prompts each run used, as core or rotated
(the ``prompt_usage`` table ``runs/rotation.py`` keeps; docs/weekly.md, Prompt rotation)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import polars as pl
import typer

from essaybench.cli.common import LockTimeoutOpt, StoreOpt, console, print_frame, reader
from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S, DEFAULT_STORE_ROOT

app = typer.Typer()


@app.command()
def rotation(
    run_id: Annotated[str | None, typer.Option(
        "--run", help="Only this run's prompts, with their roles.")] = None,
    prompt: Annotated[str | None, typer.Option(
        help="Only this prompt: the runs that used it, in which role.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="Rows shown per table.")] = 60,
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """Prompt rotation: usage per run (week, core fingerprint, core and rotated counts)
    and per prompt (times used as core and as rotated, in which weeks)."""
    from essaybench.core.errors import NotFoundError
    from essaybench.runs.lineage import lineage
    from essaybench.runs.rotation import usage_by_prompt, usage_by_run, usage_frame

    st = reader(store, lock_timeout)
    usage = usage_frame(st)
    if usage.is_empty():
        console.print(f"no run in {store} rotated its prompts (benchmark config: rotation)",
                      markup=False)
        return
    if run_id is not None:  # a rerun's selection is its base run's
        owner = next((r for r in lineage(st, run_id) if r in set(usage["run_id"])), None)
        if owner is None:
            raise NotFoundError(f"run {run_id!r} recorded no rotation in {store}")
        usage = usage.filter(pl.col("run_id") == owner)
        of = f" (the selection of {owner})" if owner != run_id else ""
        print_frame(usage.select("prompt_id", "genre", "prompt_set", "role"),
                    f"run {run_id}{of}: week {usage['week'][0]}, core "
                    f"{usage['core_fingerprint'][0]}", limit)
        return
    if prompt is not None:
        usage = usage.filter(pl.col("prompt_id") == prompt)
        if usage.is_empty():
            raise NotFoundError(f"no run used prompt {prompt!r} in {store}")
        print_frame(usage.select("week", "run_id", "role", "prompt_set_version"),
                    f"prompt {prompt}", limit)
        return
    print_frame(usage_by_run(usage), "runs", limit)
    print_frame(usage_by_prompt(usage), "prompts (times used as core / rotated)", limit)
