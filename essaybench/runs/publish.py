"""A run that publishes its store when it ends (``essaybench run --publish URL``, the
pipeline's ``publish_to`` parameter, or $ESSAYBENCH_PUBLISH_URL on the worker).

It is ``essaybench store publish --to URL`` run by the pipeline after its last stage:
the same upload (``essaybench.store.publish``), the same LATEST.json. A failed run is
published too, so the team sees its diagnostics (failed stage rows with their errors, the
health verdict, the report page). That misleads nobody: LATEST.json names a copy of the
whole catalog, not a run, and the catalog records each run's outcome, which every reader
of the pulled store sees (``essaybench runs`` prints the health, comparisons skip runs
below their floor); the last good run stays in it beside the failed one.

$ESSAYBENCH_PARTS_URL, the default of ``store publish --to``, does not turn this on: it is
also where shards write, and a sharded deployment must not start publishing unasked.
"""

from __future__ import annotations

import os
from pathlib import Path

from essaybench.core.errors import UserError
from essaybench.store import Store
from essaybench.store.parts import PartStore
from essaybench.store.publish import PublishResult, publish

PUBLISH_URL_ENV = "ESSAYBENCH_PUBLISH_URL"  # e.g. s3://essaybench/team (or a folder)


class PublishFailed(UserError):
    """The run ended, but its store could not be published; the message says how to
    publish it again by hand."""


def publish_target(given: str | None = None) -> str | None:
    """Where the run publishes its store: ``given``, else $ESSAYBENCH_PUBLISH_URL; None
    when neither is set (the run does not publish). Checked now, before the run pays for
    any call: a URL the part store cannot take is a ``UserError``."""
    url = (given if given is not None else os.environ.get(PUBLISH_URL_ENV, "")).strip()
    if not url:
        return None
    return PartStore(url).url


def publish_run(store_root: str | Path, url: str, run_id: str, outcome: str,
                lock_timeout_s: float) -> PublishResult:
    """``essaybench store publish`` of the run's store to ``url``. Any failure becomes one
    ``PublishFailed`` line naming the run, its ``outcome`` ("finished", "failed") and the
    command that publishes it again."""
    store = Store(store_root, lock_timeout_s, read_only=True)
    try:
        return publish(store, PartStore(url))
    except Exception as exc:
        cause = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        why = cause if isinstance(exc, UserError) else f"{type(exc).__name__}: {cause}"
        raise PublishFailed(
            f"run {run_id} {outcome}, but publishing its store to {url} failed: {why} "
            f"(publish it again with: essaybench store publish --store {store.root} "
            f"--to {url})") from exc
