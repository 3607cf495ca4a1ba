"""Prefect's "Engine execution exited with unexpected exception" record, as a flow-run
process logs it after a flow that ends Failed, is dropped for a verdict and kept, with
its traceback, for anything else (issue 25, item 4).

Log redaction is installed too (importing ``essaybench.tasks`` installs both, as in
every process that runs flows): it renders a record's traceback and drops its
``exc_info`` as the record is made, before the logger's filters run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from uuid import uuid4

import pytest
from prefect.logging.loggers import flow_run_logger

import essaybench.tasks  # noqa: F401  (installs log redaction and the verdict filter)
from essaybench.core.errors import UserError
from essaybench.runs.publish import PublishFailed
from essaybench.tasks.verdicts import ENGINE_MESSAGE, FLOW_RUN_LOGGER


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(logging.Formatter().format(record))


@pytest.fixture
def logged(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """What reaches the flow runs' logger's handlers (only this test's handler)."""
    handler = _Lines()
    logger = logging.getLogger(FLOW_RUN_LOGGER)
    monkeypatch.setattr(logger, "handlers", [handler])
    monkeypatch.setattr(logger, "propagate", False)
    monkeypatch.setattr(logger, "disabled", False)
    yield handler.lines


def _engine_logs(exc: Exception, message: str = ENGINE_MESSAGE) -> None:
    """As ``prefect.flow_engine.run_flow`` logs the flow's failure in a flow-run process."""
    logger = flow_run_logger(flow_run_id=uuid4())
    try:
        raise exc
    except Exception:
        logger.error(message, exc_info=True)


def _raised_from(exc: Exception, cause: BaseException) -> Exception:
    try:
        raise exc from cause
    except Exception as raised:
        return raised


@pytest.mark.parametrize("verdict", [
    UserError("judge judge changed since its calibration"),
    PublishFailed("could not publish the store"),
    _raised_from(RuntimeError("the stage failed"), UserError("over budget"))])
def test_a_verdict_logs_no_traceback(logged: list[str], verdict: Exception) -> None:
    _engine_logs(verdict)
    assert logged == []


def test_a_bug_keeps_its_traceback(logged: list[str]) -> None:
    _engine_logs(KeyError("no such key"))
    assert len(logged) == 1 and logged[0].startswith(ENGINE_MESSAGE)
    assert "Traceback (most recent call last)" in logged[0]
    assert logged[0].endswith("KeyError: 'no such key'")


def test_a_bug_raised_while_handling_a_verdict_keeps_its_traceback(
        logged: list[str]) -> None:
    try:
        raise UserError("over budget")
    except UserError:
        _engine_logs(KeyError("no such key"))  # its context is a verdict, its cause is not
    assert len(logged) == 1 and "KeyError: 'no such key'" in logged[0]


def test_other_records_about_a_verdict_are_kept(logged: list[str]) -> None:
    _engine_logs(UserError("over budget"), "Encountered exception during execution")
    assert len(logged) == 1 and logged[0].endswith("UserError: over budget")
