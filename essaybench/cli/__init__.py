"""The ``essaybench`` command line: runs the same Prefect flows a deployment runs.

One typer sub-app per command group, each in its own module; their commands are
registered at the top level (``essaybench run``, ``essaybench stats``, ...), except the
``llm`` group (``essaybench llm usage``). This package is the only part of the library
that imports ``flows`` (lazily: Prefect is slow to import).
"""

from __future__ import annotations

import typer

from essaybench.cli import analysis, benchmark, curate, estimate, llm

app = typer.Typer(help="essaybench: benchmark LLMs on Chinese essay writing.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
app.add_typer(curate.app)
app.add_typer(benchmark.app)
app.add_typer(estimate.app)
app.add_typer(analysis.app)
app.add_typer(llm.app, name="llm")

__all__ = ["app"]
