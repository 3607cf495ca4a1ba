"""Benchmark tables from the judgments table: the paper's Table 5 and per-trait means.

Every mean is taken over ``status == "ok"`` rows only and is reported beside its
coverage (ok rows with a score / all rows of that cell) and n. Failed rows
(skipped, parse_error, api_error, refused) stay in the denominator and are never
imputed, so a cell whose rows all failed has a null mean and coverage 0.

Table 5 column naming, per (judge, model) row:

* ``overall``, ``overall:coverage``, ``overall:n``, ``overall:rows``
* ``<genre>/<prompt_set>`` (e.g. ``argumentative/open``) with the same
  ``:coverage``, ``:n`` and ``:rows`` suffixes.

Coverage is null only when a cell has no rows at all (nothing was attempted).

Open and multi-genre prompts (文体不限, 议论文或记叙文: no single genre in the prompt set)
are judged with the rubric of the genre the judge said the essay chose
(``bench/judge/genre.py``), and their judgments sit in that genre's cell. When a table
holds any, every cell also gets ``:chosen`` (its rows whose genre the essay chose), so a
reader sees which cells mix prompt-decided and essay-chosen genres. A judgment whose
genre call failed has no genre: it counts in ``overall`` (as a failure) and in no cell.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from essaybench.core.contracts import OK, OVERALL, cells
from essaybench.core.export import export as export_tables
from essaybench.core.export import markdown_grid, markdown_table

KEYS = ("judge", "model")


CHOSEN = "chosen"  # suffix: a cell's rows whose genre the essay chose (open/multi prompt)
SOURCE_JUDGE = "judge"  # genre_source of those rows (bench/judge/genre.py)


def has_chosen_genres(judgments: pl.DataFrame) -> bool:
    """Whether any judgment's genre was chosen by the essay (an open/multi-genre prompt)."""
    return ("genre_source" in judgments.columns
            and bool((judgments["genre_source"] == SOURCE_JUDGE).any()))


def _cell_aggs(name: str, in_cell: pl.Expr, score: str, chosen: bool = False
               ) -> list[pl.Expr]:
    counted = in_cell & (pl.col("status") == OK) & pl.col(score).is_not_null()
    rows = in_cell.sum().cast(pl.Int64)
    n = counted.sum().cast(pl.Int64)
    aggs = [
        pl.col(score).filter(counted).mean().alias(name),
        pl.when(rows > 0).then(n / rows).otherwise(None).alias(f"{name}:coverage"),
        n.alias(f"{name}:n"),
        rows.alias(f"{name}:rows"),
    ]
    if chosen:
        by_essay = in_cell & (pl.col("genre_source") == SOURCE_JUDGE).fill_null(False)
        aggs.append(by_essay.sum().cast(pl.Int64).alias(f"{name}:{CHOSEN}"))
    return aggs


def table5(judgments: pl.DataFrame, score: str = "score_weighted") -> pl.DataFrame:
    """Per (judge, model): overall and per genre × prompt-set mean of ``score``.

    Rows are sorted by judge, then overall mean descending (nulls last), then model.
    """
    # A per-row mask (a bare literal would broadcast to one row in the sums).
    every_row = pl.int_range(pl.len()) >= 0
    chosen = has_chosen_genres(judgments)
    aggs = _cell_aggs(OVERALL, every_row, score, chosen)
    for cell in cells(judgments):
        genre, prompt_set = cell.split("/", 1)
        in_cell = (pl.col("genre") == genre) & (pl.col("prompt_set") == prompt_set)
        aggs.extend(_cell_aggs(cell, in_cell.fill_null(False), score, chosen))
    return (judgments.group_by(*KEYS).agg(aggs)
            .sort(["judge", OVERALL, "model"], descending=[False, True, False],
                  nulls_last=True))


GENRE_CHOICE_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    "judge": pl.Utf8, "model": pl.Utf8, "cell": pl.Utf8, "rows": pl.Int64,
    "chosen": pl.Int64, "chosen_ok": pl.Int64, "genre_call_failed": pl.Int64,
}


def genre_choice(judgments: pl.DataFrame) -> pl.DataFrame:
    """Per (judge, model, cell) with any judgment of an open or multi-genre prompt: the
    cell's rows, those whose genre the essay chose (and of them, ok), and in ``overall``
    the judgments whose genre call failed (in no genre cell). Empty when the run has no
    such prompt."""
    if "genre_source" not in judgments.columns:
        return pl.DataFrame(schema=GENRE_CHOICE_SCHEMA)
    by_essay = (pl.col("genre_source") == SOURCE_JUDGE).fill_null(False)
    failed = by_essay & pl.col("genre").is_null()
    rows = judgments.select(
        "judge", "model", by_essay.alias("chosen"), (by_essay & (pl.col("status") == OK))
        .alias("chosen_ok"), failed.alias("genre_call_failed"),
        pl.when(pl.col("genre").is_not_null() & pl.col("prompt_set").is_not_null())
        .then(pl.concat_str("genre", pl.lit("/"), "prompt_set")).alias("cell"))
    counts = [pl.len().cast(pl.Int64).alias("rows"),
              *(pl.col(c).sum().cast(pl.Int64).alias(c)
                for c in ("chosen", "chosen_ok", "genre_call_failed"))]
    overall = rows.group_by("judge", "model").agg(counts).with_columns(
        pl.lit(OVERALL).alias("cell"))
    per_cell = rows.filter(pl.col("cell").is_not_null()).group_by(
        "judge", "model", "cell").agg(counts)
    both = pl.concat([overall.select(list(GENRE_CHOICE_SCHEMA)),
                      per_cell.select(list(GENRE_CHOICE_SCHEMA))])
    touched = both.filter(pl.col("chosen") > 0).select("judge", "model").unique()
    return (both.join(touched, on=["judge", "model"], how="semi")
            .filter((pl.col("cell") == OVERALL) | (pl.col("chosen") > 0))
            .sort("judge", "model", pl.col("cell") != OVERALL, "cell")
            .cast(GENRE_CHOICE_SCHEMA))  # type: ignore[arg-type]


TRAIT_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    "judge": pl.Utf8, "model": pl.Utf8, "genre": pl.Utf8, "trait": pl.Utf8,
    "mean": pl.Float64, "n": pl.Int64,
}

_LONG_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    "judge": pl.Utf8, "model": pl.Utf8, "genre": pl.Utf8, "trait": pl.Utf8, "value": pl.Float64,
}


def trait_means(judgments: pl.DataFrame) -> pl.DataFrame:
    """Per (judge, model, genre, trait): mean trait sum S_t over ok rows, with n."""
    ok = judgments.filter((pl.col("status") == OK) & pl.col("trait_scores").is_not_null())
    if ok.height == 0:
        return pl.DataFrame(schema=TRAIT_SCHEMA)
    # Decoded by polars in one pass, not json.loads per row: one struct field per trait id
    # of any genre (null where a row's genre has no such trait), so the whole column is
    # read to find them, not only the first rows.
    traits = ok["trait_scores"].str.json_decode(infer_schema_length=None)
    keys = ok.select(pl.col("judge", "model", "genre").cast(pl.Utf8))
    long = pl.concat([pl.DataFrame(schema=_LONG_SCHEMA), *(
        keys.with_columns(pl.lit(name, dtype=pl.Utf8).alias("trait"),
                          traits.struct.field(name).cast(pl.Float64).alias("value"))
        for name in traits.struct.fields)]).filter(pl.col("value").is_not_null())
    if long.height == 0:  # only "{}" or null trait scores
        return pl.DataFrame(schema=TRAIT_SCHEMA)
    return (long.group_by("judge", "model", "genre", "trait")
            .agg(pl.col("value").mean().alias("mean"),
                 pl.len().cast(pl.Int64).alias("n"))
            .sort("judge", "model", "genre", "trait")
            .cast(TRAIT_SCHEMA))  # type: ignore[arg-type]


REPEAT_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    "judge": pl.Utf8, "model": pl.Utf8, "judged": pl.Int64, "repeated": pl.Int64,
    "calls": pl.Int64, "calls_ok": pl.Int64, "spread_mean": pl.Float64,
    "spread_max": pl.Float64, "question_range_max": pl.Int64,
}


def has_repeats(judgments: pl.DataFrame) -> bool:
    """Whether any essay was judged more than once (``judge.repeats``)."""
    return "repeats" in judgments.columns and bool((judgments["repeats"].fill_null(1) > 1).any())


def judge_repeats(judgments: pl.DataFrame) -> pl.DataFrame:
    """Per (judge, model), the repeated judgments (``bench/judge/repeats.py``): essays
    judged (not skipped), those repeated, their calls and ok calls, and the spread of the
    main score over a repeated essay's ok calls (mean and max of ``score_spread``) and the
    largest sub-question range. A large spread says one call would not have been the
    same judgment."""
    if "repeats" not in judgments.columns:
        return pl.DataFrame(schema=REPEAT_SCHEMA)
    judged = judgments.filter(pl.col("repeats").is_not_null())
    widest = [max(json.loads(r).values(), default=None) if r else None
              for r in judged["question_ranges"].to_list()]
    repeated = pl.col("repeats") > 1
    return (judged.with_columns(pl.Series("question_range_max", widest, dtype=pl.Int64))
            .group_by(*KEYS)
            .agg(pl.len().cast(pl.Int64).alias("judged"),
                 repeated.sum().cast(pl.Int64).alias("repeated"),
                 pl.col("repeats").filter(repeated).sum().cast(pl.Int64).alias("calls"),
                 pl.col("repeats_ok").filter(repeated).sum().cast(pl.Int64).alias("calls_ok"),
                 pl.col("score_spread").mean().alias("spread_mean"),
                 pl.col("score_spread").max().alias("spread_max"),
                 pl.col("question_range_max").max().alias("question_range_max"))
            .sort(*KEYS).cast(REPEAT_SCHEMA))  # type: ignore[arg-type]


def _fmt(mean: float | None, coverage: float | None, chosen: int | None = None) -> str:
    text = "—" if mean is None else f"{mean:.2f}"
    if coverage is not None and coverage < 1:
        # Floor so a cell that is not complete never reads as 100%.
        text += f" ({int(coverage * 100)}%)"
    if chosen:
        text += f" [{chosen} chosen]"
    return text


def _cell_text(row: dict[str, Any], column: str) -> str:
    chosen = row.get(f"{column}:{CHOSEN}")
    return _fmt(row[column], row[f"{column}:coverage"],
                chosen if isinstance(chosen, int) else None)


CHOSEN_NOTE = ("[k chosen] = k of the cell's judgments are of essays whose prompt left the "
               "genre open or offered a choice: they are in the genre the judge said the "
               "essay chose, scored with that genre's rubric. A judgment whose genre call "
               "failed counts in overall only, as a failure.")


def to_markdown(table5_df: pl.DataFrame, score_label: str) -> str:
    """Table 5 as Markdown: means to 2 decimals, coverage in brackets when below 100%.

    With several judges, one table per judge (each its own leaderboard: judges' scales
    differ, so their rows are not ranked together)."""
    names = [c for c in table5_df.columns
             if c not in KEYS and ":" not in c and c != OVERALL]
    columns = [OVERALL, *names]
    ordered = table5_df.sort(["judge", OVERALL, "model"], descending=[False, True, False],
                             nulls_last=True)
    judges = list(dict.fromkeys(str(j) for j in ordered["judge"].to_list()))
    parts = [f"### {score_label}\n"]
    for judge in judges:
        rows = ordered.filter(pl.col("judge") == judge) if len(judges) > 1 else ordered
        body = [[str(row["judge"]), str(row["model"]), *(_cell_text(row, c) for c in columns)]
                for row in rows.iter_rows(named=True)]
        if len(judges) > 1:
            parts.append(f"#### judge: {judge}\n")
        parts.append(markdown_grid(["judge", "model", *columns], body) + "\n")
        if len(judges) == 1:
            break
    note = f" {CHOSEN_NOTE}" if f"{OVERALL}:{CHOSEN}" in table5_df.columns else ""
    return ("\n".join(parts) + "\nMeans over ok judgments only; (x%) = coverage, ok / all "
            f"judgments, shown when below 100%.{note}\n")


def table5_grid(table5_df: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Table 5 as header and rows of text cells, formatted as :func:`to_markdown` does
    (sorted by judge, then overall mean): for a terminal table."""
    names = [c for c in table5_df.columns
             if c not in KEYS and ":" not in c and c != OVERALL]
    columns = [OVERALL, *names]
    ordered = table5_df.sort(["judge", OVERALL, "model"], descending=[False, True, False],
                             nulls_last=True)
    body = [[str(row["judge"]), str(row["model"]), *(_cell_text(row, c) for c in columns)]
            for row in ordered.iter_rows(named=True)]
    return ["judge", "model", *columns], body


def render_markdown(df: pl.DataFrame, name: str) -> str:
    """A table in the Table 5 layout (it has ``overall:coverage``) with :func:`to_markdown`,
    any other as a plain table."""
    if f"{OVERALL}:coverage" in df.columns:
        return to_markdown(df, name)
    return markdown_table(df, name)


def export(tables: dict[str, pl.DataFrame], folder: Path | str) -> dict[str, Path]:
    """Write each table as ``<name>.parquet``, ``.csv`` and ``.md`` (Table 5 layouts
    rendered as Table 5); return file name → path."""
    return export_tables(tables, folder, render_markdown)
