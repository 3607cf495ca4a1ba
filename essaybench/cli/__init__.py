"""The ``essaybench`` command line: runs the same Prefect flows a deployment runs.

One typer sub-app per command group, each in its own module; their commands are
registered at the top level (``essaybench run``, ``essaybench stats``, ...), except the
``llm`` and ``store`` groups (``essaybench llm usage``, ``essaybench store pull``). This
package is the only part of the library that imports ``essaybench.flows`` (lazily: Prefect is slow
to import). Whatever goes wrong ends the command with one line and an exit code
(``errors``); ``--debug`` adds the traceback.
"""

from __future__ import annotations

from typing import Annotated

import typer

from essaybench import __version__
from essaybench.cli import analysis, benchmark, curate, estimate, llm, report, store_cmd
from essaybench.cli.common import STATE
from essaybench.cli.errors import EssaybenchGroup

app = typer.Typer(help="essaybench: benchmark LLMs on Chinese essay writing.",
                  no_args_is_help=True, pretty_exceptions_enable=False, cls=EssaybenchGroup)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"essaybench {__version__}")
        raise typer.Exit()


@app.callback()
def _options(debug: Annotated[bool, typer.Option(
        "--debug", envvar="ESSAYBENCH_DEBUG",
        help="On an error, print its traceback (and Prefect's) before the one-line "
             "message.")] = False,
        version: Annotated[bool, typer.Option(
            "--version", callback=_print_version, is_eager=True,
            help="Print the installed version and exit.")] = False) -> None:
    STATE.debug = debug


app.add_typer(curate.app)
app.add_typer(benchmark.app)
app.add_typer(estimate.app)
app.add_typer(analysis.app)
app.add_typer(report.app)
app.add_typer(llm.app, name="llm")
app.add_typer(store_cmd.app, name="store")

__all__ = ["app"]
