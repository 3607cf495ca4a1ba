"""A flow run that ends Failed with a verdict logs the verdict, not a traceback.

A flow that returns a ``Failed`` state (an unhealthy run, a failed publish) or raises a
user's mistake (a judge not calibrated, a run over budget) ends Failed with a clean state
message, and Prefect's engine logs "Finished in state Failed('…')". But a flow-run
process (``python -m prefect.engine``, what a worker starts) then asks the engine for
the flow's result, which re-raises the failure, and ``prefect.flow_engine.run_flow``
logs it as "Engine execution exited with unexpected exception" with a full traceback
(prefect 3.9) on the flow run's logger: a worker's log (and the run's logs in the UI)
showed a stack trace for what is a verdict, not a crash (issue 25, item 4).

``quiet_verdict_tracebacks`` drops that one record when the exception is such a verdict;
any other exception (a bug) keeps its traceback.
"""

from __future__ import annotations

import logging

from essaybench.bench.health import RunUnhealthy
from essaybench.core.errors import user_error_of
from essaybench.runs.publish import PublishFailed
from essaybench.store.run_stage import StageFailed

ENGINE_MESSAGE = "Engine execution exited with unexpected exception"
FLOW_RUN_LOGGER = "prefect.flow_runs"


def is_verdict(exc: BaseException | None) -> bool:
    """Whether ``exc`` is how a run ends by design (its message says it all)."""
    if isinstance(exc, RunUnhealthy | PublishFailed):
        return True
    if isinstance(exc, StageFailed):
        return exc.user_error is not None
    return exc is not None and user_error_of(exc) is not None


class _VerdictTraceback(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != ENGINE_MESSAGE or not record.exc_info:
            return True
        return not is_verdict(record.exc_info[1])


def quiet_verdict_tracebacks() -> None:
    """Install the filter on the flow runs' logger (once per process)."""
    logger = logging.getLogger(FLOW_RUN_LOGGER)
    if not any(isinstance(f, _VerdictTraceback) for f in logger.filters):
        logger.addFilter(_VerdictTraceback())
