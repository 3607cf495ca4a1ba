"""A flow run by a worker or a deployment redacts its logs too, not only the CLI's
(issue 13, item 4): a worker loads a flow by its file path, as here, and the record of
an exception that quotes a secret reaches Prefect's handlers (its API stores logs in its
database) redacted, traceback included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from essaybench.core.paths import PROJECT_ROOT

pytestmark = pytest.mark.slow

SECRET = "tok-9f8e7d6c5b4a392817"

SCRIPT = textwrap.dedent("""
    import json, logging, sys
    from prefect.flows import load_flow_from_entrypoint

    # As a worker does: by prefect.yaml's entrypoint, a module path.
    flow = load_flow_from_entrypoint("essaybench.flows.alerts:alerts_flow")
    seen = []

    class Capture(logging.Handler):
        def emit(self, record):
            seen.append(logging.Formatter().format(record))

    logging.getLogger("prefect").addHandler(Capture())
    try:
        flow(run_id="run-" + sys.argv[1], store_root=sys.argv[2])
    except Exception as exc:
        raised = f"{type(exc).__name__}: {exc}"
    print(json.dumps({"raised": raised, "records": seen}))
    """)


def test_a_flow_runs_log_records_are_redacted(tmp_path: Path) -> None:
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "DO_NOT_TRACK": "1",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
           "ESSAYBENCH_TEST_TOKEN": SECRET}
    done = subprocess.run([sys.executable, "-c", SCRIPT, SECRET, str(tmp_path / "store")],
                          capture_output=True, text=True, env=env, cwd=PROJECT_ROOT,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    # The flow raised with the secret in its message (the run id it was given) ...
    assert f"alerts: no successful 'judge' snapshot in run run-{SECRET} of " in out["raised"]
    # ... and Prefect logged that exception, with its traceback, but never the secret.
    reports = [r for r in out["records"] if "Traceback (most recent call last)" in r]
    assert reports, out["records"]
    assert all("run-[REDACTED]" in r for r in reports)
    assert not any(SECRET in r for r in out["records"])
    assert SECRET not in done.stderr  # Prefect's console handler got the same records
