"""Default locations, overridable by environment variables (never hard-coded in functions).

Read when this module is first imported: for a scheduled flow run that is on the worker,
as the run starts (the weekly deployment leaves these parameters to the flow's defaults),
so the worker's environment decides, not the shell that registered the deployment.
Relative paths resolve against the working directory (a flow run's: the project home).

Inside a project (core.project: ``essaybench.toml`` in the current folder or above, or
``$ESSAYBENCH_PROJECT``) the defaults are the project's configs, store and reports; each
``ESSAYBENCH_*`` variable below still overrides its own. A broken ``essaybench.toml`` is
kept in ``PROJECT_ERROR`` (the command line says it in one line before any command runs)
and the defaults are then the package's."""

from __future__ import annotations

import os

from essaybench.core.paths import default_store_root, resource
from essaybench.core.project import project_or_error

PROJECT, PROJECT_ERROR = project_or_error()

DEFAULT_CURATE_CONFIG = os.environ.get("ESSAYBENCH_CURATE_CONFIG") or str(
    PROJECT.curate_config if PROJECT else resource("configs", "curate.yaml"))
DEFAULT_STORE_ROOT = os.environ.get("ESSAYBENCH_STORE") or str(default_store_root())
DEFAULT_BENCHMARK_CONFIG = os.environ.get("ESSAYBENCH_BENCHMARK_CONFIG") or str(
    PROJECT.benchmark_config if PROJECT else resource("configs", "benchmark.yaml"))
# Where `essaybench report` also puts each run's page (<reports>/<run>/report.html): the
# project's reports folder; None outside a project (the page stays in the store only).
DEFAULT_REPORTS_DIR = str(PROJECT.reports) if PROJECT else None
# How long a writer waits for another process's lock on the store (catalog, call ledger)
# before giving up; commands that write the store take --lock-timeout, flows lock_timeout_s.
DEFAULT_LOCK_TIMEOUT_S = 120.0
