"""Default locations, overridable by environment variables (never hard-coded in functions).

Read when this module is first imported: for a scheduled flow run that is on the worker,
as the run starts (the weekly deployment leaves these parameters to the flow's defaults),
so the worker's environment decides, not the shell that registered the deployment.
Relative paths resolve against the working directory (a flow run's: the project home)."""

from __future__ import annotations

import os

from essaybench.core.paths import default_store_root, resource

DEFAULT_CURATE_CONFIG = os.environ.get(
    "ESSAYBENCH_CURATE_CONFIG", str(resource("configs", "curate.yaml")))
DEFAULT_STORE_ROOT = os.environ.get("ESSAYBENCH_STORE", str(default_store_root()))
DEFAULT_BENCHMARK_CONFIG = os.environ.get(
    "ESSAYBENCH_BENCHMARK_CONFIG", str(resource("configs", "benchmark.yaml")))
# How long a writer waits for another process's lock on the store (catalog, call ledger)
# before giving up; commands that write the store take --lock-timeout, flows lock_timeout_s.
DEFAULT_LOCK_TIMEOUT_S = 120.0
