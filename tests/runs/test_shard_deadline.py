"""When a shard that never starts fails its run, the line that says so, and the pool
setups refused before any shard starts (``runs.shard_deadline``)."""

from __future__ import annotations

from essaybench.runs.shard_deadline import WaitingShard, slot_conflict, start_overdue, stuck_line


def test_the_clock_runs_from_the_later_of_sending_and_the_runs_last_progress() -> None:
    assert start_overdue(sent_at=100, progress_at=0, now=159, deadline_s=60) is None
    assert start_overdue(sent_at=100, progress_at=0, now=161, deadline_s=60) == 61
    # Another shard of the run started or ended at 150: waiting for its slot is progress.
    assert start_overdue(sent_at=100, progress_at=150, now=161, deadline_s=60) is None
    assert start_overdue(sent_at=100, progress_at=150, now=211, deadline_s=60) == 61


def test_the_failure_names_each_stuck_shard_and_what_to_check() -> None:
    line = stuck_line("r1", [WaitingShard(2, "id-2", "Late"), WaitingShard(0, "id-0", "Scheduled")],
                      61.4, "essaybench-process", "shards")
    assert "\n" not in line
    assert line.startswith("run r1: 2 shard(s) never started in 61 s (shard 0: flow run "
                           "id-0 Scheduled; shard 2: flow run id-2 Late); cancelled them. ")
    assert ("a worker is running and serves the work queue 'shards' of the work pool "
            "'essaybench-process' (prefect worker start --pool essaybench-process "
            "--work-queue shards)") in line


def test_a_parent_holding_a_slot_its_shards_need_is_refused() -> None:
    def conflict(parent: tuple[str | None, str | None], pool_limit: int | None,
                 queue_limit: int | None, at_once: int) -> str | None:
        return slot_conflict(parent[0], parent[1], "p", "shards", pool_limit, queue_limit,
                             at_once, "pipeline-shard/x")

    # Not started from a deployment, or on another pool: the parent holds none of the slots.
    assert conflict((None, None), 1, 1, 4) is None
    assert conflict(("other", "shards"), 1, 1, 4) is None
    # The runbook's queue split: the parent on the pool's default queue; the shards'
    # queue limit is not the parent's, the pool's is shared.
    assert conflict(("p", "default"), None, 1, 4) is None
    assert conflict(("p", "default"), 5, None, 4) is None
    line = conflict(("p", "default"), 4, None, 4)
    assert line == ("the work pool 'p' has a concurrency limit of 4, and this pipeline run "
                    "holds one of its slots while its 4 shard(s) at once (pipeline-shard/x) "
                    "need the others: raise the limit to at least 5, set sharding.parallel "
                    "to 3 or less, or run the pipeline on another queue or pool "
                    '(docs/scale-out.md, "Runbook: two or three hosts")')
    # One queue for both (no split): its limit of 1 is the parent's own slot, a deadlock.
    line = conflict(("p", "shards"), None, 1, 1)
    assert line is not None and line.startswith(
        "the work queue 'shards' of that pool has a concurrency limit of 1, ")
    assert "sharding.parallel" not in line and "at least 2" in line
