"""A shard must see the folder its run's plan is in (issue 31, the runbook).

The parent writes the plan to its part store before it starts any shard, and passes the
store's URL to each shard. A local folder (the default, ``<store>/parts``) is on the
parent's disk: a shard on another host finds no plan there. Since the plan is always
written first, a shard that finds no plan in a local folder is on a machine that cannot
see the parent's folder; it stops with one line that says what to set, instead of an error
about a missing file."""

from __future__ import annotations

import socket

from essaybench.runs.shards import ShardRefused, plan_path
from essaybench.store.parts import PARTS_URL_ENV, PartStore

RUNBOOK = 'docs/scale-out.md, "Runbook: two or three hosts"'


class PartsNotSharedError(ShardRefused):
    """A shard's part store is a local folder this host does not share with the parent."""


def require_plan_visible(parts: PartStore, run_id: str) -> None:
    """Nothing when ``parts`` is object storage or its folder holds the run's plan;
    otherwise PartsNotSharedError, one line."""
    if not parts.is_local or parts.exists(plan_path(run_id)):
        return
    raise PartsNotSharedError(
        f"shard of run {run_id} on host {socket.gethostname()}: the part store "
        f"{parts.url} is a local folder without the run's plan, so it is not the "
        f"pipeline's: shards on other hosts cannot see the pipeline's disk; set "
        f"{PARTS_URL_ENV}=s3://BUCKET/PREFIX on the pipeline's host ({RUNBOOK})")
