"""Report export: each table as Parquet, CSV and Markdown, and gathered Markdown reports.

Stages write their report tables through :func:`export`; a table with a layout of its
own (Table 5) brings its own Markdown renderer (see
:func:`essaybench.bench.aggregate.render_markdown`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import polars as pl

Render = Callable[[pl.DataFrame, str], str]  # (table, name) -> Markdown


def markdown_grid(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def markdown_table(df: pl.DataFrame, title: str) -> str:
    """Any table as Markdown under a ``###`` title: floats to 2 decimals, nulls (and NaN,
    an undefined statistic: a column beside it says why) as —."""
    def cell(value: object) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "—"
        return f"{value:.2f}" if isinstance(value, float) else str(value)

    body = [[cell(v) for v in row] for row in df.iter_rows()]
    return f"### {title}\n\n" + markdown_grid(df.columns, body) + "\n"


def export(tables: dict[str, pl.DataFrame], folder: Path | str,
           render: Render = markdown_table) -> dict[str, Path]:
    """Write each table as ``<name>.parquet``, ``.csv`` and ``.md``; return file name → path."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for name, df in tables.items():
        parquet, csv, md = (out / f"{name}.{ext}" for ext in ("parquet", "csv", "md"))
        df.write_parquet(parquet)
        df.write_csv(csv)
        md.write_text(render(df, name), encoding="utf-8")
        written.update({parquet.name: parquet, csv.name: csv, md.name: md})
    return written


def write_report(tables: dict[str, pl.DataFrame], folder: Path, title: str, *,
                 intro: Sequence[str] = (), name: str | None = None,
                 render: Render = markdown_table) -> Path:
    """Export every table and gather their Markdown, after ``# title`` and ``intro``, into
    ``<folder>/<name>`` (default ``<folder name>.md``); returns that path."""
    paths = export(tables, folder, render)
    report = folder / (name or f"{folder.name}.md")
    parts = [f"# {title}\n", *intro]
    parts += [paths[f"{table}.md"].read_text(encoding="utf-8") for table in tables]
    report.write_text("\n".join(parts), encoding="utf-8")
    return report
