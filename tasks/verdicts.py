"""A flow run that ends Failed with a verdict logs the verdict, not a traceback.

A flow that returns a ``Failed`` state for a verdict (the pipeline's: an unhealthy run, a
refusal such as a judge not calibrated or a run over budget, a failed publish) ends
Failed with a clean state message, and Prefect's engine logs "Finished in state
Failed('…')". But a flow-run
process (``python -m prefect.engine``, what a worker starts) then asks the engine for
the flow's result, which re-raises the failure, and ``prefect.flow_engine.run_flow``
logs it as "Engine execution exited with unexpected exception" with a full traceback
(prefect 3.9) on the flow run's logger: a worker's log (and the run's logs in the UI)
showed a stack trace for what is a verdict, not a crash (issue 25, item 4).

``quiet_verdict_tracebacks`` drops that one record when the exception is such a verdict
(the engine's "Finished in state Failed('…')" is then the one line the log shows); any
other exception (a bug) keeps its traceback. The filter does not read the record's
``exc_info``: log redaction (``core.redact``) renders the traceback to ``exc_text`` and
drops ``exc_info`` as the record is made, before any filter runs. It reads the exception
being handled instead, the one ``exc_info=True`` captured: the engine logs that record
from its ``except`` clause, and a logger's filters run within the logging call.
"""

from __future__ import annotations

import logging
import sys

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
        if record.msg != ENGINE_MESSAGE:
            return True
        return not is_verdict(_logged_exception(record))


def _logged_exception(record: logging.LogRecord) -> BaseException | None:
    """The exception ``record`` was logged with: its ``exc_info`` if redaction left it,
    else the one being handled (what ``exc_info=True`` took); None without a traceback."""
    if record.exc_info:
        return record.exc_info[1]
    return sys.exc_info()[1] if record.exc_text else None


def quiet_verdict_tracebacks() -> None:
    """Install the filter on the flow runs' logger (once per process)."""
    logger = logging.getLogger(FLOW_RUN_LOGGER)
    if not any(isinstance(f, _VerdictTraceback) for f in logger.filters):
        logger.addFilter(_VerdictTraceback())
