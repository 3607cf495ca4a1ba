"""Prefect task that publishes the run's store when the run ends (``essaybench.runs.publish``).

No retries: a publish that failed leaves LATEST.json as it was (it is written last), and
the flow fails naming the command that publishes again, which is always safe.
"""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from essaybench.core.activity import doing
from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S
from essaybench.runs.publish import publish_run
from essaybench.store.publish import PublishResult


@task(name="publish", cache_policy=NO_CACHE, task_run_name="publish")
def publish_task(run_id: str, store_root: str, url: str, outcome: str,
                 lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> PublishResult:
    with doing("publish"):  # uploads take a while: a progress display names them
        result = publish_run(store_root, url, run_id, outcome, lock_timeout_s)
    get_run_logger().info("published the store to %s: %d uploaded, %d already there; "
                          "catalog %s", result["url"], result["uploaded"], result["skipped"],
                          result["catalog"])
    if result["missing"]:
        get_run_logger().warning("the catalog names %d files the store does not have: %s",
                                 len(result["missing"]), ", ".join(result["missing"][:3]))
    return result
