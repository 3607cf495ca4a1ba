"""A sharded run never hangs (issue 31 item 4): when a shard that never starts fails the
run, and which pool setups would deadlock before anything starts. Pure: the parent's
fan-out (``flows/_fanout.py``) reads Prefect and passes what it saw.

A shard waits (Scheduled, Late) while no worker serves its work queue, or while the pool's
slots are all taken. Waiting for a slot the run's own shards hold is progress (they end,
the slot frees: ``parallel`` below the shard count does exactly that), so the clock runs
from the later of the attempt's sending and the last time a shard of the run started or
ended. The parent is one flow run too: on the shards' pool (or queue) it holds one of the
slots they need, so a limit below 1 + the shards run at once could leave every slot to
parents waiting for shards that cannot start."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

RUNBOOK = 'docs/scale-out.md, "Runbook: two or three hosts"'


@dataclass(frozen=True)
class WaitingShard:
    """A shard attempt that has not started: its index, flow run id and state name."""

    index: int
    flow_run_id: str
    state: str


def start_overdue(sent_at: float, progress_at: float, now: float,
                  deadline_s: float) -> float | None:
    """Seconds a not-yet-started attempt has waited with no shard of its run starting or
    ending, when that is more than ``deadline_s``; None while it may still start.
    Times are one clock's seconds (monotonic)."""
    waited = now - max(sent_at, progress_at)
    return waited if waited > deadline_s else None


def stuck_line(run_id: str, waiting: Sequence[WaitingShard], waited_s: float,
               pool: str | None, queue: str | None) -> str:
    """The run's failure, one line: the stuck shards, their flow runs and states, and what
    to check."""
    where = (f"the work queue {queue!r} of the work pool {pool!r}" if pool and queue
             else f"the work pool {pool!r}" if pool else "the shard deployment's work pool")
    shards = "; ".join(f"shard {w.index}: flow run {w.flow_run_id} {w.state}"
                       for w in sorted(waiting, key=lambda w: w.index))
    return (f"run {run_id}: {len(waiting)} shard(s) never started in {waited_s:.0f} s "
            f"({shards}); cancelled them. Check that a worker is running and serves {where} "
            f"(prefect worker start --pool {pool or 'POOL'} --work-queue {queue or 'shards'}) "
            f"and that the pool is not full of other runs ({RUNBOOK})")


def slot_conflict(parent_pool: str | None, parent_queue: str | None, shard_pool: str | None,
                  shard_queue: str | None, pool_limit: int | None, queue_limit: int | None,
                  at_once: int, deployment: str) -> str | None:
    """Why the parent would hold a slot its own shards need (None: it does not). The
    parent (a flow run on ``parent_pool``/``parent_queue``; None: not started from a
    deployment, it holds no slot) shares the pool's limit when it is on the shards' pool,
    and the queue's when on their queue too; a shared limit below 1 + ``at_once`` (the
    shards run at once: ``parallel``, or all) is refused before any shard starts."""
    if parent_pool is None or parent_pool != shard_pool:
        return None
    shared = [(f"work pool {shard_pool!r}", pool_limit)]
    if parent_queue is not None and parent_queue == shard_queue:
        shared.append((f"work queue {shard_queue!r} of that pool", queue_limit))
    for what, limit in shared:
        if limit is not None and limit < 1 + at_once:
            fewer = (f", set sharding.parallel to {limit - 1} or less" if limit >= 2
                     else "")
            return (f"the {what} has a concurrency limit of {limit}, and this pipeline run "
                    f"holds one of its slots while its {at_once} shard(s) at once "
                    f"({deployment}) need the others: raise the limit to at least "
                    f"{1 + at_once}{fewer}, or run the pipeline on another queue or pool "
                    f"({RUNBOOK})")
    return None
