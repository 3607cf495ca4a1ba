"""How a command ends when something goes wrong: one line on stderr and an exit code,
the same for every command and for errors raised inside Prefect flows and tasks::

    error: <what is wrong, and where>    exit 2: the user's mistake (an option, a config or
                                         input file, a run id, a busy store; core.errors)
    run failed: <what failed>            exit 1: a run that failed (failures.py adds what
                                         to rerun)
    error: unexpected <Type>: <text>     exit 1: a bug

``--debug`` (or ``ESSAYBENCH_DEBUG=1``) prints the traceback first (and leaves Prefect's
console its own tracebacks); the last line and the exit code stay the same. Every line is
redacted of secrets (an exception's text may quote a provider's error body).
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

from essaybench.cli.common import STATE
from essaybench.core.errors import user_error_of
from essaybench.core.redact import redact

USAGE_EXIT = 2  # the user's mistake
FAILED_EXIT = 1  # a failed run, or a bug
SHOWN_PROBLEMS = 5  # of a message listing one problem per line (a config, a file)


def one_line(message: str) -> str:
    """``message`` as one line, redacted: a message listing several problems, one per
    line ("invalid annotations:" and each with its file and line), keeps the first few,
    joined with "; ", and says how many more there were."""
    lines = [line.strip() for line in redact(str(message)).strip().splitlines()]
    lines = [line for line in lines if line] or [""]
    head = lines.pop(0) if len(lines) > 1 and lines[0].endswith(":") else None
    shown = "; ".join(lines[:SHOWN_PROBLEMS])
    if len(lines) > SHOWN_PROBLEMS:
        shown += f" (+{len(lines) - SHOWN_PROBLEMS} more)"
    return f"{head} {shown}" if head else shown


def fail(message: str) -> NoReturn:
    """A user's mistake found by the command itself: one line on stderr, exit code 2."""
    typer.echo(f"error: {one_line(message)}", err=True)
    raise typer.Exit(USAGE_EXIT)


def _usage_line(exc: Exception) -> str:
    """A command-line mistake the parser or a command found (typer's click exceptions):
    "invalid value for --run: …", "missing option '--run' (see: essaybench rerun --help)"."""
    if isinstance(exc, typer.BadParameter) and exc.param_hint is None and exc.param is None:
        return one_line(exc.message)  # a command's own check, about no option in particular
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    line = one_line(message[:1].lower() + message[1:]).removesuffix(".")
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, typer.BadParameter) or ctx is None:
        return line
    return f"{line} (see: {ctx.command_path} --help)"


def outcome(exc: BaseException) -> tuple[int, str | None]:
    """The exit code of a command that raised ``exc``, and the line that says why."""
    from essaybench.bench.health import RunUnhealthy
    from essaybench.store.run_stage import StageFailed

    if type(exc).__name__ == "NoArgsIsHelpError":  # typer printed the help already
        return int(getattr(exc, "exit_code", USAGE_EXIT)), None
    if isinstance(exc, typer.Abort):
        return FAILED_EXIT, "aborted"
    if isinstance(exc, typer.TyperException):  # the parser's and BadParameter
        return int(getattr(exc, "exit_code", USAGE_EXIT)), f"error: {_usage_line(exc)}"
    if isinstance(exc, StageFailed):
        if exc.user_error is not None:
            return USAGE_EXIT, f"error: {one_line(exc.user_error)}"
        return FAILED_EXIT, f"run failed: {one_line(str(exc))}"
    if isinstance(exc, RunUnhealthy):
        return FAILED_EXIT, f"run failed: {one_line(exc.explanation)}"
    mistake = user_error_of(exc)
    if mistake is not None:
        return USAGE_EXIT, f"error: {one_line(str(mistake))}"
    return FAILED_EXIT, (f"error: unexpected {type(exc).__name__}: {one_line(str(exc))} "
                         "(essaybench --debug ... shows the traceback)")


def report(exc: BaseException) -> int:
    """Say why the command failed (with the traceback under --debug); its exit code."""
    code, line = outcome(exc)
    if STATE.debug and line is not None:
        text = "".join(traceback.format_exception(exc))
        sys.stderr.write(redact(text))
    if line is not None:
        typer.echo(line, err=True)
    return code


class _StderrLines(logging.Handler):
    """A log record as a plain line on the stderr of the moment (a test runner swaps it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            typer.echo(self.format(record), err=True)
        except Exception:  # never let a progress message break the command
            self.handleError(record)


def _show_lock_waits() -> None:
    """Who holds a lock this command waits for, said while it waits (store.lock)."""
    logger = logging.getLogger("essaybench.store.lock")
    if not any(isinstance(h, _StderrLines) for h in logger.handlers):
        logger.addHandler(_StderrLines())
        logger.setLevel(logging.INFO)
        logger.propagate = False  # not again through Prefect's console


class EssaybenchGroup(TyperGroup):
    """The top-level command group: every error ends the command as ``report`` says."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             windows_expand_args: bool = True, **extra: Any) -> Any:
        STATE.debug = False  # set by the --debug option of this invocation
        _show_lock_waits()
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False,
                                  windows_expand_args=windows_expand_args, **extra)
            code = result if isinstance(result, int) else 0
        except Exception as exc:
            code = report(exc)
        if standalone_mode:
            sys.exit(code)
        return code
