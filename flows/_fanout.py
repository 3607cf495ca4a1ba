"""Fan a sharded run's shards out to the work pool and wait for them (Prefect's side of
``essaybench.stages.shard``).

Each shard is a flow run of the shard deployment, created with ``run_deployment(...,
timeout=0)`` as a subflow of the pipeline run, and an idempotency key per attempt: a parent
that restarts finds its attempts instead of starting them twice. A shard that ends
FAILED or CRASHED is sent again, up to ``retries`` times. A running shard whose worker was
killed (nobody is left to report the crash) is marked CRASHED by Prefect's zombie
automation when its flow-run heartbeats stop (``liveness: prefect``, ``tasks.zombies``),
or by this loop when the heartbeat file it writes under the part store stops (``parts``);
a shard a worker took but whose process never came up (Pending past ``startup_grace_s``:
no heartbeat of either kind is sent before the flow engine runs) is marked CRASHED here.
The new attempt is served every call the old one recorded. A
shard that refused to run (its flow run ends ``Refused``: another plan, other code, a part
store it cannot see) fails the run at once: every attempt would be refused alike. A shard
that never starts fails the run after ``start_deadline_s`` (``runs.shard_deadline``), its
flow run cancelled; a parent on the shards' own pool whose limit leaves them no slot is
refused before any shard is sent.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from prefect import get_run_logger
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.objects import FlowRun, State
from prefect.deployments import run_deployment
from prefect.exceptions import ObjectNotFound
from prefect.runtime import flow_run as this_flow_run
from prefect.states import Cancelled, Crashed

from essaybench.bench.sharding import ShardingParams
from essaybench.runs.shard_deadline import WaitingShard, slot_conflict, start_overdue, stuck_line
from essaybench.runs.shards import REFUSED_STATE, heartbeat_path, owner_path
from essaybench.stages.shard import ShardError, shard_done
from essaybench.store.parts import PartStore
from essaybench.tasks.zombies import ensure_zombie_automation


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


def refusal(state: State[Any] | None) -> str | None:
    """The refusal's line when a shard's flow run ended ``Refused`` (final: never sent
    again); None for any other state. State[Any]: any flow's state (State is invariant in its
    result type: a State[dict[str, Any]] is no State[object])."""
    if state is None or not state.is_failed() or state.name != REFUSED_STATE:
        return None
    return state.message or "refused to run"


def refuse_slot_conflict(client: SyncPrefectClient, params: ShardingParams,
                         n_shards: int, parent_id: str | None) -> None:
    """Refuses (one line) a parent (flow run ``parent_id``) that holds a slot of the limit
    its own shards need."""
    if parent_id is None:
        return
    parent = client.read_flow_run(UUID(parent_id))
    if parent.work_pool_name is None:  # not started from a deployment: holds no slot
        return
    try:
        deployment = client.read_deployment_by_name(params.deployment)
    except ObjectNotFound:
        return  # said in one line when the first shard is sent
    pool_name, queue_name = deployment.work_pool_name, deployment.work_queue_name
    if pool_name != parent.work_pool_name:
        return
    pool_limit = client.read_work_pool(pool_name).concurrency_limit
    queue_limit = None
    if queue_name is not None and queue_name == parent.work_queue_name:
        queue_limit = client.read_work_queue_by_name(
            queue_name, work_pool_name=pool_name).concurrency_limit
    why = slot_conflict(parent.work_pool_name, parent.work_queue_name, pool_name,
                        queue_name, pool_limit, queue_limit,
                        min(params.parallel or n_shards, n_shards), params.deployment)
    if why is not None:
        raise ShardError(why)


def run_shards(parts: PartStore, run_id: str, n_shards: int, params: ShardingParams,
               poll_s: float = 2.0, plan_digest: str | None = None) -> dict[int, int]:
    """Returns the attempts each shard took (0: done before this call). ``plan_digest``:
    passed to every shard, which refuses any other plan."""
    log = get_run_logger()
    attempts = dict.fromkeys(range(n_shards), 0)
    running: dict[int, UUID] = {}
    sent_at: dict[int, float] = {}
    where: dict[str, str | None] = {"pool": None, "queue": None}

    def submit(k: int) -> None:
        attempts[k] += 1
        sent_at[k] = time.monotonic()
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
        where["pool"], where["queue"] = flow_run.work_pool_name, flow_run.work_queue_name
        # The attempt the run waits for: an older one still alive stops (ShardSuperseded).
        parts.put_json(owner_path(run_id, k), {"attempt": str(flow_run.id)})

    with get_client(sync_client=True) as client:
        parent_id = this_flow_run.id
        refuse_slot_conflict(client, params, n_shards,
                             None if parent_id is None else str(parent_id))
    if params.liveness == "prefect":
        ensure_zombie_automation(params.stale_after_s)
    for k in range(n_shards):
        if not shard_done(parts, run_id, k):
            submit(k)
    log.info("run %s: %d of %d shards sent to %s", run_id, len(running), n_shards,
             params.deployment)
    last_report = progress_at = time.monotonic()
    with get_client(sync_client=True) as client:
        try:
            while running:
                time.sleep(poll_s)
                now = datetime.now(UTC)
                states: dict[str, int] = {}
                waiting: list[WaitingShard] = []
                for k, flow_run_id in sorted(running.items()):
                    state = client.read_flow_run(flow_run_id).state
                    name = (state.name if state is not None else None) or "Unknown"
                    states[name] = states.get(name, 0) + 1
                    if state is None or state.is_scheduled():  # Scheduled, Late: not started
                        waiting.append(WaitingShard(k, str(flow_run_id), name))
                        continue
                    progress_at = time.monotonic()  # started or ended: the pool moves
                    if state.is_completed() and shard_done(parts, run_id, k):
                        del running[k]
                        log.info("shard %d of run %s done (attempt %d)", k, run_id, attempts[k])
                        continue
                    refused = refusal(state)
                    if refused is not None:  # every attempt would be refused alike
                        raise ShardError(f"{refused} (not sent again)")
                    why = None
                    if state.is_final():
                        why = f"ended {name}: {state.message or ''}".strip()
                    elif state.is_pending() or (state.is_running()
                                                and params.liveness == "parts"):
                        # Pending: a worker took it and is starting its process (or died doing
                        # so: then nobody moves it on). Scheduled runs wait for a free slot.
                        # Running: Prefect's automation crashes a silent one (liveness: prefect).
                        beat = (parts.read_json(heartbeat_path(run_id, k, str(flow_run_id)))
                                if params.liveness == "parts" else None)
                        why = _stale(beat, state.timestamp, now, params)
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
                overdue = [w for w in waiting if start_overdue(
                    sent_at[w.index], progress_at, time.monotonic(), params.start_deadline_s)]
                if overdue:
                    _cancel(client, waiting, run_id)
                    waited = time.monotonic() - max(progress_at,
                                                    min(sent_at[w.index] for w in overdue))
                    raise ShardError(stuck_line(run_id, waiting, waited, where["pool"],
                                                where["queue"]))
                if time.monotonic() - last_report > 30:
                    last_report = time.monotonic()
                    log.info("run %s: %d shard(s) left: %s", run_id, len(running),
                             ", ".join(f"{n} {s}" for s, n in sorted(states.items())))
        except ShardError:  # the run fails: no shard of it may start later
            _cancel_unstarted(client, running, run_id)
            raise
    return attempts


def _cancel_unstarted(client: SyncPrefectClient, running: dict[int, UUID],
                      run_id: str) -> None:
    """Cancels the run's shards that have not started (a worker that comes later must not
    start shards of a failed run). Running shards finish what they are doing: their
    parts are the run's, and killing one mid-call would not unpay it."""
    waiting = []
    for k, flow_run_id in sorted(running.items()):
        state = client.read_flow_run(flow_run_id).state
        if state is None or state.is_scheduled():
            name = (state.name if state is not None else None) or "Unknown"
            waiting.append(WaitingShard(k, str(flow_run_id), name))
    _cancel(client, waiting, run_id)


def _cancel(client: SyncPrefectClient, waiting: list[WaitingShard], run_id: str) -> None:
    """Cancels the shards that never started: a worker that comes later must not start
    shards of a run that has failed."""
    for w in waiting:
        client.set_flow_run_state(UUID(w.flow_run_id), Cancelled(
            message=f"run {run_id} failed: shard {w.index} never started"), force=True)
