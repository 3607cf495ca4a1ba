"""Prefect task for the alerts stage: compare with the last comparable run, tell people.

The alerts go to the flow run's log (the terminal of whoever runs it), to a Markdown
artifact on the flow run (key ``alerts-<run id>``), and to the config's webhooks (by the
stage itself).
"""

from __future__ import annotations

import re
from logging import INFO, WARNING

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from essaybench.bench.config import load_benchmark_config
from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S
from essaybench.stages.alerts import alerts_stage
from essaybench.store import Store


def artifact_key(run_id: str, kind: str = "alerts") -> str:
    """``<kind>-<run id>``: artifact keys take lowercase letters, digits and dashes only."""
    return f"{kind}-" + re.sub(r"[^a-z0-9-]+", "-", run_id.lower()).strip("-")


@task(name="alerts-stage", cache_policy=NO_CACHE, task_run_name="alerts")
def alerts_stage_task(run_id: str, config_path: str, store_root: str,
                      judge_snapshot_id: str,
                      lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> str:
    store = Store(store_root, lock_timeout_s)
    config = load_benchmark_config(config_path)
    result = alerts_stage(store, run_id, config.alerts, store.get_snapshot(judge_snapshot_id),
                          config.flagged_essays)
    log = get_run_logger()
    for line in result.lines():
        log.log(WARNING if result.alerts else INFO, "%s", line)
    create_markdown_artifact(markdown=result.markdown(), key=artifact_key(run_id),
                             description=f"Week-over-week alerts of run {run_id}")
    return result.snapshot.snapshot_id
