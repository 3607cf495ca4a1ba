"""Fan a sharded run's shards out to the work pool and wait for them (Prefect's side of
``essaybench.stages.shard``).

Each shard is a flow run of the shard deployment, created with ``run_deployment(...,
timeout=0)`` as a subflow of the pipeline run, and an idempotency key per attempt: a parent
that restarts finds its attempts instead of starting them twice. A shard that ends
FAILED or CRASHED, or whose heartbeat stops while Prefect still lists it RUNNING (its
worker was killed: nobody is left to report the crash), is marked CRASHED and sent again,
up to ``retries`` times; the new attempt is served every call the old one recorded.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from uuid import UUID

from prefect import get_run_logger
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import FlowRun
from prefect.deployments import run_deployment
from prefect.exceptions import ObjectNotFound
from prefect.states import Crashed

from essaybench.bench.sharding import ShardingParams
from essaybench.runs.shards import heartbeat_path, owner_path
from essaybench.stages.shard import ShardError, shard_done
from essaybench.store.parts import PartStore


def _stale(beat: object, running_since: datetime | None, now: datetime,
           params: ShardingParams) -> str | None:
    """Why a RUNNING attempt is taken for dead (None: it is alive): its last heartbeat is
    older than ``stale_after_s``, or it never beat within ``startup_grace_s``."""
    at = beat.get("at") if isinstance(beat, dict) else None
    if isinstance(at, str) and at:
        age = (now - datetime.fromisoformat(at)).total_seconds()
        return f"no heartbeat for {age:.0f} s" if age > params.stale_after_s else None
    if running_since is None:
        return None
    age = (now - running_since).total_seconds()
    return (f"no heartbeat {age:.0f} s after it started" if age > params.startup_grace_s
            else None)


def run_shards(parts: PartStore, run_id: str, n_shards: int, params: ShardingParams,
               poll_s: float = 2.0, plan_digest: str | None = None) -> dict[int, int]:
    """Returns the attempts each shard took (0: done before this call). ``plan_digest``:
    passed to every shard, which refuses any other plan."""
    log = get_run_logger()
    attempts = dict.fromkeys(range(n_shards), 0)
    running: dict[int, UUID] = {}

    def submit(k: int) -> None:
        attempts[k] += 1
        try:
            flow_run = run_deployment(
                params.deployment, parameters={"parts_url": parts.url, "run_id": run_id,
                                               "index": k, "plan_digest": plan_digest},
                timeout=0, tags=[run_id, f"shard={k}"],
                idempotency_key=f"{run_id}/shard={k}/attempt={attempts[k]}")
            assert isinstance(flow_run, FlowRun)  # called from sync code: not a coroutine
        except ObjectNotFound as exc:
            raise ShardError(f"sharding needs the deployment {params.deployment!r} on the "
                             "Prefect server (prefect deploy --all, and workers on its pool; "
                             "README, \"Running on several machines\")") from exc
        running[k] = flow_run.id
        # The attempt the run waits for: an older one still alive stops (ShardSuperseded).
        parts.put_json(owner_path(run_id, k), {"attempt": str(flow_run.id)})

    for k in range(n_shards):
        if not shard_done(parts, run_id, k):
            submit(k)
    log.info("run %s: %d of %d shards sent to %s", run_id, len(running), n_shards,
             params.deployment)
    last_report = time.monotonic()
    with get_client(sync_client=True) as client:
        while running:
            time.sleep(poll_s)
            now = datetime.now(UTC)
            states: dict[str, int] = {}
            for k, flow_run_id in sorted(running.items()):
                state = client.read_flow_run(flow_run_id).state
                name = (state.name if state is not None else None) or "Unknown"
                states[name] = states.get(name, 0) + 1
                if state is not None and state.is_completed() and shard_done(parts, run_id, k):
                    del running[k]
                    log.info("shard %d of run %s done (attempt %d)", k, run_id, attempts[k])
                    continue
                why = None
                if state is not None and state.is_final():
                    why = f"ended {name}: {state.message or ''}".strip()
                elif state is not None and (state.is_running() or state.is_pending()):
                    # Pending: a worker took it and is starting its process (or died doing
                    # so: then nobody moves it on). Scheduled runs wait for a free slot.
                    why = _stale(parts.read_json(heartbeat_path(run_id, k, str(flow_run_id))),
                                 state.timestamp, now, params)
                    if why is not None:
                        client.set_flow_run_state(flow_run_id, Crashed(message=why), force=True)
                if why is None:
                    continue
                del running[k]
                if attempts[k] > params.retries:
                    raise ShardError(f"shard {k} of run {run_id} failed {attempts[k]} "
                                     f"time(s), last: {why}")
                log.warning("shard %d of run %s %s; sending it again (attempt %d)", k,
                            run_id, why, attempts[k] + 1)
                submit(k)
            if time.monotonic() - last_report > 30:
                last_report = time.monotonic()
                log.info("run %s: %d shard(s) left: %s", run_id, len(running),
                         ", ".join(f"{n} {s}" for s, n in sorted(states.items())))
    return attempts
