"""The ``essaybench`` command line: runs the same Prefect flows a deployment runs.

One typer sub-app per command group, each in its own module; their commands are
registered at the top level (``essaybench run``, ``essaybench stats``, ...), except the
``llm`` and ``store`` groups (``essaybench llm usage``, ``essaybench store pull``). This
package is the only part of the library that imports ``essaybench.flows`` (lazily: Prefect is slow
to import). Whatever goes wrong ends the command with one line and an exit code
(``errors``); ``--debug`` adds the traceback.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from essaybench.core.project import PROJECT_ENV


def _project_from_argv(argv: list[str]) -> None:
    """``essaybench --project DIR CMD``: the commands' defaults (configs, registry, store)
    are read when their modules are imported (core.settings), so the option is taken from
    the command line here, before, as if ``$ESSAYBENCH_PROJECT`` named DIR."""
    for i, arg in enumerate(argv):
        if arg == "--":
            return
        if arg == "--project" and i + 1 < len(argv):
            os.environ[PROJECT_ENV] = str(Path(argv[i + 1]).expanduser().resolve())
            return
        if arg.startswith("--project="):
            os.environ[PROJECT_ENV] = str(Path(arg.split("=", 1)[1]).expanduser().resolve())
            return


_project_from_argv(sys.argv[1:])

from essaybench import __version__  # noqa: E402 (after --project is known)
from essaybench.cli import (  # noqa: E402
    analysis,
    benchmark,
    curate,
    estimate,
    gold,
    llm,
    project,
    report,
    rotation,
    spot_check,
    store_cmd,
)
from essaybench.cli.common import STATE  # noqa: E402
from essaybench.cli.errors import EssaybenchGroup  # noqa: E402

app = typer.Typer(help="essaybench: benchmark LLMs on Chinese essay writing.",
                  no_args_is_help=True, pretty_exceptions_enable=False, cls=EssaybenchGroup)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"essaybench {__version__}")
        raise typer.Exit()


# Commands that work in a folder whose essaybench.toml is broken (init writes a new one,
# doctor reports the mistake as one of its lines) or that never use a project (the demo is
# sealed: its bundled configs and a store of its own, whatever $ESSAYBENCH_PROJECT says).
_WITHOUT_PROJECT = {"init", "doctor", "demo"}


@app.callback()
def _options(ctx: typer.Context, debug: Annotated[bool, typer.Option(
        "--debug", envvar="ESSAYBENCH_DEBUG",
        help="On an error, print its traceback (and Prefect's) before the one-line "
             "message.")] = False,
        version: Annotated[bool, typer.Option(
            "--version", callback=_print_version, is_eager=True,
            help="Print the installed version and exit.")] = False,
        project_dir: Annotated[Path | None, typer.Option(
            "--project", metavar="DIR",
            help="The project folder (holding essaybench.toml) whose configs, registry and "
                 "store the command uses. Default: $ESSAYBENCH_PROJECT, else the nearest "
                 "folder from the current one upward holding essaybench.toml.")] = None,
        ) -> None:
    STATE.debug = debug
    from essaybench.core.settings import PROJECT, PROJECT_ERROR

    if ctx.invoked_subcommand in _WITHOUT_PROJECT:
        return
    if PROJECT_ERROR is not None:
        raise PROJECT_ERROR
    if project_dir is not None and (
            PROJECT is None or PROJECT.root != project_dir.expanduser().resolve()):
        # Only when called in-process after the defaults were read (tests): say so.
        raise typer.BadParameter("--project was given after essaybench's defaults were "
                                 "read; set $ESSAYBENCH_PROJECT instead", param_hint="--project")


app.add_typer(curate.app)
app.add_typer(benchmark.app)
app.add_typer(estimate.app)
app.add_typer(analysis.app)
app.add_typer(report.app)
app.add_typer(rotation.app)
app.add_typer(spot_check.app)
app.add_typer(llm.app, name="llm")
app.add_typer(gold.app, name="gold")
app.add_typer(store_cmd.app, name="store")
app.add_typer(project.app)

__all__ = ["app"]
