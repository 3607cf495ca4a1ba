"""Thin Prefect tasks: each body calls one library function.

Every flow module imports a task module, so this package is where a process that runs
flows (a worker's flow-run process, a deployment's, the CLI's) installs log redaction:
Prefect's log records, an exception's traceback included, are redacted of secrets
before any handler formats or ships them (its API handler stores them in its
database). A flow loaded by file path (``flows/stats.py``) never runs
``essaybench/flows/__init__.py``; it always imports ``essaybench.tasks``. So is where a
flow run that ends Failed with a verdict (an unhealthy run, a user's mistake) stops the
engine logging it as an unexpected exception with a traceback (``verdicts``)."""

from essaybench.core.redact import install_log_redaction
from essaybench.tasks.verdicts import quiet_verdict_tracebacks

install_log_redaction()
quiet_verdict_tracebacks()
