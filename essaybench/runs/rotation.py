"""Prompt rotation in the store: the ``prompt_usage`` catalog table.

- ``rotation_selection``: a run's weekly set. A run (or a rerun: along the chain of runs
  it continues) that already recorded one gets it back, and nothing new is recorded or
  paid for; otherwise it is drawn (``bench/rotation.py``) from the usage of every other
  run and recorded before any essay is written.
- ``run_core``: the core prompt ids a run compared on (None: the run did not rotate).
- ``usage_frame``: every recorded row, for ``essaybench rotation``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import duckdb
import polars as pl

from essaybench.bench.rotation import CORE, PromptUse, RotationParams, Selection, draw_rotation
from essaybench.core.sql import statement
from essaybench.runs.lineage import lineage
from essaybench.store import Store

__all__ = ["USAGE_COLUMNS", "compared_prompts", "recorded_selection", "rotation_selection",
           "run_core", "usage_frame"]

USAGE_COLUMNS = ("run_id", "week", "prompt_set_version", "prompt_id", "genre", "prompt_set",
                 "role", "core_fingerprint", "core_settings", "recorded_at")


def usage_frame(store: Store) -> pl.DataFrame:
    """Every (run, prompt, role) recorded, by week (empty: no run rotated)."""
    with store.connect() as con:  # the table is created by the first run that rotates
        return _usage(con, create=False)


def _usage(con: duckdb.DuckDBPyConnection, *, create: bool) -> pl.DataFrame:
    if create:
        con.execute(statement("prompt_usage_schema"))
    exists = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = "
                         "'prompt_usage' AND table_catalog = current_database()").fetchone()
    rows = con.execute(statement("prompt_usage_all")).fetchall() \
        if exists and exists[0] else []
    schema: dict[str, pl.DataType] = {c: pl.Utf8() for c in USAGE_COLUMNS}
    schema.update(week=pl.Int64(), recorded_at=pl.Datetime(time_zone="UTC"))
    return pl.DataFrame(rows, schema=schema, orient="row")


def _recorded(usage: pl.DataFrame, runs: Sequence[str]) -> tuple[str, pl.DataFrame]:
    """The first of ``runs`` (a run's lineage) that recorded a selection, and its rows;
    else (the run itself, no rows)."""
    for run in runs:
        rows = usage.filter(pl.col("run_id") == run)
        if rows.height:
            return run, rows
    return runs[0], usage.clear()


def _selection_of(rows: pl.DataFrame) -> Selection:
    return Selection(dict(rows.select("prompt_id", "role").iter_rows()),
                     int(rows["week"][0]), str(rows["core_fingerprint"][0]), False,
                     ("the selection recorded by run " + str(rows["run_id"][0]),))


def rotation_selection(store: Store, run_id: str, prompts: pl.DataFrame, version: str,
                       per_genre: int, params: RotationParams,
                       genres: Sequence[str] | None = None) -> tuple[Selection, pl.DataFrame]:
    """(the run's selection, its prompts): reused when recorded along the run's
    lineage, else drawn from every other run's usage and recorded now."""
    runs = list(lineage(store, run_id))
    # Read, draw and record under one catalog lock: two runs starting at once get
    # consecutive weeks, never the same draw.
    with store.connect() as con:
        usage = _usage(con, create=True)
        owner, rows = _recorded(usage, runs)
        if rows.height:
            selection = _selection_of(rows)
        else:
            history = [PromptUse(int(w), str(p), str(r), str(s)) for w, p, r, s in
                       usage.select("week", "prompt_id", "role", "core_settings").iter_rows()]
            selection = draw_rotation(prompts, per_genre, params, history, genres)
            _record(con, owner, selection, prompts, version,
                    params.core_settings(per_genre, genres))
    chosen = prompts.filter(pl.col("prompt_id").is_in(list(selection.roles)))
    return selection, chosen.sort("genre", "prompt_id")


def recorded_selection(store: Store, run_id: str, prompts: pl.DataFrame
                       ) -> tuple[Selection, pl.DataFrame] | None:
    """The selection recorded along ``run_id``'s lineage and its prompts (None: none);
    a rerun writes its base run's whatever its own config says about rotation."""
    _, rows = _recorded(usage_frame(store), list(lineage(store, run_id)))
    if not rows.height:
        return None
    selection = _selection_of(rows)
    chosen = prompts.filter(pl.col("prompt_id").is_in(list(selection.roles)))
    return selection, chosen.sort("genre", "prompt_id")


def _record(con: duckdb.DuckDBPyConnection, run_id: str, selection: Selection,
            prompts: pl.DataFrame, version: str, settings: str) -> None:
    now = datetime.now(UTC)
    info = {pid: (genre, pset) for pid, genre, pset in
            prompts.select("prompt_id", "genre", "prompt_set").iter_rows()}
    for pid, role in sorted(selection.roles.items()):
        genre, pset = info[pid]
        con.execute(statement("prompt_usage_insert"), {
            "run_id": run_id, "week": selection.week, "prompt_set_version": version,
            "prompt_id": pid, "genre": genre, "prompt_set": pset, "role": role,
            "core_fingerprint": selection.fingerprint, "core_settings": settings,
            "recorded_at": now})


def run_core(store: Store, run_id: str) -> set[str] | None:
    """The core prompt ids of ``run_id``'s selection (along its lineage); None when the
    run did not rotate."""
    _, rows = _recorded(usage_frame(store), list(lineage(store, run_id)))
    if not rows.height:
        return None
    return set(rows.filter(pl.col("role") == CORE)["prompt_id"].to_list())


def compared_prompts(store: Store, run_id: str, base_run: str | None
                     ) -> tuple[set[str] | None, str | None]:
    """The prompts a comparison of ``run_id`` with ``base_run`` uses, and one line saying
    so: with rotation, the core prompts of ``run_id`` (and of ``base_run``, when it
    rotated too: the cores in common); (None, None) when ``run_id`` did not rotate."""
    core = run_core(store, run_id)
    if core is None:
        return None, None
    before = run_core(store, base_run) if base_run is not None else None
    common = core if before is None else core & before
    usage = usage_frame(store)
    _, rows = _recorded(usage, list(lineage(store, run_id)))
    fingerprint = str(rows["core_fingerprint"][0])
    left = rows.height - len(core)
    changed = (f"; the cores differ ({len(core)} now, {len(before)} in {base_run}): "
               f"{len(common)} in common" if before is not None and before != core else "")
    if not common:
        return common, (f"rotation: compared on the core only: no core prompt in common "
                        f"with {base_run} (the core changed: {fingerprint} now){changed}; "
                        "nothing compared week over week")
    return common, (f"rotation: compared on the core only: {len(common)} prompts (core "
                    f"{fingerprint}); {left} rotated prompts left out of the comparison "
                    f"(they count on the leaderboard){changed}")


def usage_by_run(usage: pl.DataFrame) -> pl.DataFrame:
    """One row per run: its week, prompt set, core fingerprint, core and rotated counts."""
    return usage.group_by("week", "run_id", "prompt_set_version", "core_fingerprint").agg(
        core=(pl.col("role") == CORE).sum(), rotated=(pl.col("role") != CORE).sum(),
    ).sort("week", "run_id")


def usage_by_prompt(usage: pl.DataFrame) -> pl.DataFrame:
    """One row per prompt ever used: its stratum, how often in each role, the weeks."""
    return usage.group_by("prompt_id", "genre", "prompt_set").agg(
        core=(pl.col("role") == CORE).sum(), rotated=(pl.col("role") != CORE).sum(),
        weeks=pl.col("week").sort().cast(pl.Utf8).str.join(","),
    ).sort("genre", "prompt_set", "prompt_id", nulls_last=True)
