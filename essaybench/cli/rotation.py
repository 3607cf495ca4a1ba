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
    from essaybench.runs.rotation import usage_by_prompt, usage_by_run, usage_frame

    usage = usage_frame(reader(store, lock_timeout))
    if usage.is_empty():
        console.print(f"no run in {store} rotated its prompts (benchmark config: rotation)",
                      markup=False)
        return
    if run_id is not None:
        usage = usage.filter(pl.col("run_id") == run_id)
        if usage.is_empty():
            raise NotFoundError(f"run {run_id!r} recorded no rotation in {store}")
        print_frame(usage.select("prompt_id", "genre", "prompt_set", "role"),
                    f"run {run_id}: week {usage['week'][0]}, core "
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
