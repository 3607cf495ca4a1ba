"""Scale-out on loopback (issue 17): a private PostgreSQL, a Prefect server on it, a process
work pool with two workers, an S3-compatible server (moto) holding the shards' parts, and
the fake OpenAI-compatible server; the weekly pipeline deployment run twice on the same
synthetic prompt set:

1. in one process (``shards=0``): the reference;
2. sharded (``--shards``, default 8) on the pool, one worker killed (``kill -9``, with the
   flow-run processes it started) while it runs a shard. The pipeline sees the shard's
   heartbeat stop, marks it CRASHED and sends it again; the other worker finishes it.

Checks, each printed: both runs Completed; every (prompt, writer) cell of the sharded run
written and judged ok; every call the killed shard had recorded was served to its second
attempt from the ledger, not sent again; no call was paid twice (the fake's counters):
the calls in flight at the kill are re-sent with the same Idempotency-Key, and the fake,
like a provider that honours the header, answers them from its record uncharged; the
merged generate and judge snapshots equal the single-process run's (timing columns
aside); and every process started is stopped at the end. The last line is PASS (exit 0)
or FAIL (exit 1). Killed with SIGTERM it stops everything on its way out; with SIGKILL a
watcher (``ops.reaper``) does: the stack, moto, the fake server, the namespaces.

``--provider-ignores-idempotency``: the fake ignores the header, as OpenAI's chat
completions do; then the calls in flight at the kill are paid again, and the check is that
they are at most those (the killed shard's concurrency).

Where it may (root), each worker runs in a network namespace of its own (``ops/netns.py``),
reaching the server, S3 and the fake only over a bridge; ``--no-netns`` skips that.
``--partition`` cuts the worker's link for longer than the heartbeat timeout instead of
killing it, then restores it: the shard is sent again elsewhere, and the old attempt, alive
again and superseded, must record nothing more (the same checks then hold).
``--disrupt partition kill`` does both on one stack, one sharded run each, against the same
single-process reference (what ``tests/ops/test_scale_out.py`` runs: one stack, not two).

``--disrupt edit`` (or ``--edit-config``, with each disruption above) rewrites
``models.yaml`` and ``benchmark.yaml`` while a shard runs (other model ids, writers,
statistics) and puts them back after the run: nothing after planning may read them, so
the same checks hold (nothing paid twice, snapshots equal the single-process run's).

Figures: wall time of each run (the flow run's start to end, from Prefect: neither wall
holds the stack's start, printed apart) and the shards' start-up (flow run created →
shard code running).

``--per-host-endpoints``: where more workers really add capacity. Self-hosted models,
one server per worker host: a fake server in each worker's network namespace (on
127.0.0.1 without namespaces), serving ``--capacity`` requests at once (more queue) with
``--latency-ms`` each; every worker's ``ESSAYBENCH_ENDPOINTS`` (``llm.endpoints``) sends
the registry's models (base_url ``http://self-hosted.invalid/v1``, which nothing can
reach) to its own host's server, as the runbook's hosts do. ``--shards`` + 1 workers,
each running one flow run at a time: worker-1 the pipeline (the store host), every
other one shard. The single-process run has one host's capacity, the sharded run
``--shards`` times that. Asserted, one formula::

    T_n <= (1/n + 0.10) * T_1 + S      (n = 4: 0.35 * T_1 + S)

T_1, T_n: the single-process and sharded walls; S: the sharded run's start-up, its
slowest shard's (created → running): no shard computes before its process is up. Also
checked: every call paid once over all hosts' servers, each shard host's server served
its shard, none served more than its capacity at once.

    python benchmarks/scale_out.py [--prompts 48] [--models 4] [--shards 8]
                                   [--also-shards 2 4 16] [--latency-ms 50]
                                   [--concurrency 8] [--no-kill] [--varying] [--keep DIR]
                                   [--provider-ignores-idempotency] [--no-netns]
                                   [--partition | --disrupt {kill,partition,edit} ...]
                                   [--edit-config]
    python benchmarks/scale_out.py --per-host-endpoints [--shards 4] [--capacity 4]
                                   [--latency-ms 1000] [--prompts 160] [--repeat 3]

Paper scale (README table): --prompts 728 --models 15 --latency-ms 300 --concurrency 64.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import polars as pl
import psutil  # type: ignore[import-untyped]
import yaml
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags
from prefect.client.schemas.objects import FlowRun
from prefect.settings import PREFECT_API_URL, temporary_settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from benchmarks.pipeline_scale import synthetic_prompt_set
from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.client import idempotency_token, token_of_header
from essaybench.llm.endpoints import ENDPOINTS_ENV
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, spawn_fake_server
from essaybench.runs.shards import ledger_prefix, success_path
from essaybench.stages.shard import ROW_KEYS, first_difference, read_plan, stable_rows
from essaybench.store import Store
from essaybench.store.parts import PARTS_URL_ENV, S3_ENDPOINT_ENV, PartStore, ensure_bucket
from essaybench.store.runs import looks_like_run_id
from ops import local_stack, netns
from ops.reaper import Reaper
from ops.s3_local import moto_s3

PREFECT = str(Path(sys.executable).with_name("prefect"))
WEEKLY = "pipeline/pipeline-weekly"
STALE_S = 20.0  # the sharded run's sharding.stale_after_s: a dead shard is re-sent after it
PARTITION_S = STALE_S + 25.0  # --partition: the re-sent attempt runs while the old one lives
GRACE_S = 90.0  # sharding.startup_grace_s: a shard killed before its first heartbeat
DISRUPTIONS = ("kill", "partition", "edit")
SELF_HOSTED = "http://self-hosted.invalid/v1"  # --per-host-endpoints: the models' name only
SLACK = 0.10  # T_n <= (1/n + SLACK) * T_1 + S: 0.35 at n = 4 (issue 31 item 7)


class Failed(AssertionError):
    pass


def check(ok: bool, what: str) -> None:
    print(f"  {'ok  ' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        raise Failed(what)


def wait_for(ready: Callable[[], bool], timeout: float, what: str, poll: float = 1.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise Failed(f"{what}: not within {timeout:g} s")
        time.sleep(poll)


@contextmanager
def stack(folder: Path, workers: int, pool_limit: int, env: dict[str, str],
          net: netns.Netns | None, worker_env: dict[int, dict[str, str]] | None = None,
          store_worker: bool = False) -> Iterator[str]:
    """The local stack (PostgreSQL, Prefect server, pool, workers, each worker in a network
    namespace of ``net`` if given, with ``worker_env[k]`` over ``env``; ``store_worker``:
    the runbook's queues, only worker-1 runs the pipeline); its API URL. Stopped at the
    end, and checked to have left nothing running (no process, namespace or link)."""
    state_dir = folder / "stack"
    try:
        # Each worker takes at most its share of the pool: the pipeline's worker cannot
        # take every shard too, so a disruption always finds one on another worker.
        state = local_stack.start(state_dir, workers, pool_limit, ui=False, timeout=240,
                                  env=env, netns=net if net is not None else False,
                                  worker_limit=-(-pool_limit // workers),
                                  worker_env=worker_env, store_worker=store_worker)
        assert state.api_url is not None
        yield state.api_url
    finally:
        left = local_stack.stop(state_dir, purge=True)
        print(f"  {'ok  ' if not left else 'FAIL'} stack stopped"
              f"{'' if not left else f': still running {left}'}", flush=True)
        if left:
            raise Failed(f"processes left running: {left}")


def deploy(api: str, env: dict[str, str]) -> None:
    """``prefect deploy`` of the weekly pipeline and the shard flow, from the checkout."""
    subprocess.run([PREFECT, "--no-prompt", "deploy", "--name", "pipeline-weekly",
                    "--name", "pipeline-shard"], cwd=PROJECT_ROOT, check=True, timeout=300,
                   env={**env, "PREFECT_API_URL": api}, stdout=subprocess.DEVNULL)


def trigger(client: SyncPrefectClient, **parameters: Any) -> UUID:
    deployment = client.read_deployment_by_name(WEEKLY)
    return client.create_flow_run_from_deployment(deployment.id, parameters=parameters).id


def final(client: SyncPrefectClient, flow_run_id: UUID, timeout: float) -> FlowRun:
    found: list[FlowRun] = []

    def done() -> bool:
        run = client.read_flow_run(flow_run_id)
        if run.state is not None and run.state.is_final():
            found.append(run)
        return bool(found)

    wait_for(done, timeout, f"flow run {flow_run_id}")
    return found[0]


def seconds(run: FlowRun) -> float:
    assert run.start_time is not None and run.end_time is not None
    return float((run.end_time - run.start_time).total_seconds())


def flow_run_processes() -> dict[str, psutil.Process]:
    """The process running each flow run, by flow run id (workers pass the id in its
    environment): one pass over the processes, however many runs are looked up."""
    found: dict[str, psutil.Process] = {}
    for proc in psutil.process_iter():
        try:
            flow_run = proc.environ().get("PREFECT__FLOW_RUN_ID")
        except psutil.Error:
            continue
        if flow_run:
            found.setdefault(flow_run, proc)
    return found


def worker_of(proc: psutil.Process, workers: dict[str, int]) -> str | None:
    try:
        ancestors = {p.pid for p in proc.parents()}
    except psutil.Error:
        return None
    return next((name for name, pid in workers.items() if pid in ancestors), None)


def kill_worker(pid: int) -> list[int]:
    """``kill -9`` a worker and every process under it (the machine is gone)."""
    procs = [psutil.Process(pid)]
    procs += procs[0].children(recursive=True)
    for proc in procs:
        with suppress(psutil.Error):
            proc.send_signal(signal.SIGKILL)
    psutil.wait_procs(procs, timeout=10)
    return [p.pid for p in procs]


def shard_runs(client: SyncPrefectClient, run_id: str) -> list[FlowRun]:
    """The shard flow runs of ``run_id`` (the pipeline tags them run id and shard=K)."""
    return [r for r in client.read_flow_runs(flow_run_filter=FlowRunFilter(
        tags=FlowRunFilterTags(all_=[run_id]))) if shard_index(r) is not None]


def shard_index(run: FlowRun) -> int | None:
    return next((int(t.removeprefix("shard=")) for t in run.tags if t.startswith("shard=")),
                None)


Disrupt = Callable[[str], str]  # given the victim worker's name, disrupt it; say what was done


def kill_one_shard_worker(client: SyncPrefectClient, parent: UUID, run_id: str,
                          parts: PartStore, workers: dict[str, int],
                          timeout: float, disrupt: Disrupt,
                          any_worker: bool = False) -> dict[str, Any]:
    """Wait until a worker other than the parent's (``any_worker``: any worker, for a
    disruption that spares the workers) runs a shard that has recorded calls, then disrupt
    it (kill it, or cut it off); what was done and which calls its shards had recorded."""
    found: list[psutil.Process] = []

    def parent_running() -> bool:
        proc = flow_run_processes().get(str(parent))
        if proc is not None:
            found.append(proc)
        return proc is not None

    wait_for(parent_running, timeout, "the pipeline's process")
    parent_worker = worker_of(found[0], workers)
    victim: dict[str, Any] = {}

    def pick() -> bool:
        running = flow_run_processes()
        state = client.read_flow_run(parent).state
        if state is not None and state.is_final():
            raise Failed("the pipeline ended before a shard ran on a worker other than "
                         "its own with calls recorded: nothing to disrupt (give the shards "
                         "longer: raise --latency-ms or lower --concurrency)")
        for run in shard_runs(client, run_id):
            if run.state is None or not run.state.is_running():
                continue
            proc = running.get(str(run.id))
            worker = worker_of(proc, workers) if proc else None
            index = shard_index(run)
            if index is not None and worker and (any_worker or worker != parent_worker) \
                    and parts.list(
                    ledger_prefix(run_id, index), ".parquet"):
                victim.update(worker=worker, shard=index, flow_run=run.id)
                return True
        return False

    wait_for(pick, timeout, "a shard with recorded calls on the other worker", poll=0.2)
    # Every shard the victim runs (it may run several): their recorded calls at the kill.
    killed_shards: list[int] = []
    running = flow_run_processes()
    for run in shard_runs(client, run_id):
        proc = running.get(str(run.id)) if run.state and run.state.is_running() else None
        index = shard_index(run)
        if proc is not None and index is not None and worker_of(proc, workers) == \
                victim["worker"]:
            killed_shards.append(index)
    done = disrupt(victim["worker"])
    recorded: set[str] = set()
    for index in killed_shards:
        for rel in parts.list(ledger_prefix(run_id, index), ".parquet"):
            recorded |= set(parts.read_parquet(rel)["key"].to_list())
    return {**victim, "shards": killed_shards, "done": done, "recorded": recorded}


def isolated_network(args: argparse.Namespace) -> netns.Netns | None:
    """The workers' network namespaces (``--no-netns`` or no permission: None, said)."""
    if not args.netns:
        return None
    why = netns.unavailable()
    if why is not None:
        print(f"  workers share the host's network ({why})", flush=True)
        return None
    return netns.create(args.workers)


class ConfigEdit:
    """Rewrites the run's ``models.yaml`` and ``benchmark.yaml`` while it runs (other model
    ids and limits, a writer fewer, other statistics and shards), and puts them back
    (``restore``). Read after planning, either would change calls or tables."""

    def __init__(self, folder: Path) -> None:
        self.files = [folder / "models.yaml", folder / "benchmark.yaml"]
        self.saved: dict[Path, str] = {}

    def __call__(self) -> str:
        self.saved = {path: path.read_text("utf-8") for path in self.files}
        models, bench = (yaml.safe_load(text) for text in self.saved.values())
        for spec in models["models"].values():
            spec.update(model_id=f"{spec['model_id']}-edited", max_concurrency=1)
        bench["generate"]["models"] = bench["generate"]["models"][:-1]
        bench["stats"]["n_boot"] = 50
        bench["sharding"]["shards"] += 1
        for path, doc in zip(self.files, (models, bench), strict=True):
            path.write_text(yaml.safe_dump(doc), "utf-8")
        return ("edited models.yaml and benchmark.yaml (model ids, limits, a writer fewer, "
                "n_boot, shards)")

    def restore(self) -> None:
        for path, text in self.saved.items():
            path.write_text(text, "utf-8")
        self.saved = {}


def disruption(kind: str, workers: dict[str, int], net: netns.Netns | None,
               healers: list[threading.Timer], edit: ConfigEdit | None) -> Disrupt:
    """``kill``: ``kill -9`` of a worker and what it started; ``partition``: its network
    link cut for PARTITION_S and then restored (the worker and its flow runs live on; the
    timer that restores it goes to ``healers``); ``edit``: the config edited (``edit``),
    which also goes with a kill or a partition when given."""
    if kind == "edit":
        assert edit is not None
        return lambda name: edit()
    if kind == "kill":
        def act(name: str) -> str:
            return f"killed {name} (pids {kill_worker(workers[name])})"
    elif net is None:
        raise Failed("a partition needs the workers in network namespaces (root)")
    else:
        def act(name: str) -> str:
            k = int(name.removeprefix("worker-"))
            netns.cut(net, k)
            healer = threading.Timer(PARTITION_S, netns.heal, (net, k))
            healer.start()
            healers.append(healer)
            return f"cut {name} off the network for {PARTITION_S:g} s"
    if edit is None:
        return act
    return lambda name: f"{act(name)}; {edit()}"



def join_all(threads: list[threading.Timer]) -> None:
    for thread in threads:
        thread.join()


def netns_gone(net: netns.Netns) -> None:
    left = netns.teardown(net)  # the stack's stop removed them; this is the safety net
    check(not left, f"network namespaces removed{'' if not left else f': left {left}'}")


def namespace_of(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


Counts = dict[str, tuple[int, int]]  # per request body: completed (paid), replayed


def fake_counts(servers: list[FakeServerHandle]) -> tuple[Counts, dict[str, int]]:
    """The fakes' counters per request body, and their arrivals per Idempotency-Key, summed
    over the servers (one per host with --per-host-endpoints: a call each of two hosts
    answered was paid twice)."""
    counts: Counts = {}
    tokens: dict[str, int] = {}
    for server in servers:
        stats = server.stats(per_key=True)
        for k, v in (stats.per_key or {}).items():
            done, replayed = counts.get(k, (0, 0))
            counts[k] = (done + v.completed, replayed + v.replayed)
        for token, n in (stats.per_token or {}).items():
            tokens[token] = tokens.get(token, 0) + n
    return counts, tokens


def snapshot(store: Store, run_id: str, stage: str) -> pl.DataFrame:
    rows = [r for r in store.stage_runs(run_id, 1000) if r.stage == stage and r.status == "ok"]
    assert rows and rows[0].snapshot_id is not None, (run_id, stage)
    return store.get_snapshot(rows[0].snapshot_id).read()


def startup_s(client: SyncPrefectClient, parts: PartStore, run_id: str) -> list[float]:
    """Per shard attempt that finished: flow run created → shard code running."""
    out = []
    plan = read_plan(parts, run_id)
    assert plan is not None
    done = {shard_index(r): r for r in shard_runs(client, run_id)
            if r.state is not None and r.state.is_completed()}
    for index, run in done.items():
        if index is None:
            continue
        record = parts.read_json(success_path(run_id, "judge", index)) or {}
        if record.get("started_at") and run.created is not None:
            began = datetime.fromisoformat(record["started_at"])
            out.append((began - run.created).total_seconds())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=None,
                        help="default 48 (160 with --per-host-endpoints)")
    parser.add_argument("--models", type=int, default=4)
    parser.add_argument("--shards", type=int, default=None,
                        help="default 8 (4 with --per-host-endpoints)")
    parser.add_argument("--latency-ms", type=int, default=None,
                        help="default 50 (1000 with --per-host-endpoints)")
    parser.add_argument("--per-host-endpoints", dest="per_host", action="store_true",
                        help="self-hosted models, one server per worker host with a fixed "
                             "capacity: asserts T_n <= (1/n + 0.10) T_1 + S (module doc)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="--per-host-endpoints: (single process, sharded) pairs on one "
                             "stack; the formula is asserted on their medians")
    parser.add_argument("--capacity", type=int, default=4,
                        help="--per-host-endpoints: requests each host's server serves at "
                             "once (more wait in its queue)")
    parser.add_argument("--concurrency", type=int, default=None,
                        help="each model's max_concurrency (default 8; with "
                             "--per-host-endpoints capacity x shards: split among the "
                             "shards, each shard's share of the judge still fills its "
                             "host's server)")
    parser.add_argument("--also-shards", type=int, nargs="*", default=[], metavar="N",
                        help="after the first sharded run, one more (no kill) per count, on "
                             "the same stack; prints a table of wall time by shard count")
    parser.add_argument("--workers", type=int, default=None,
                        help="default 2 (shards + 1 with --per-host-endpoints)")
    parser.add_argument("--parallel", type=int, default=None,
                        help="shards running at once (default: 2 per worker)")
    parser.add_argument("--varying", action="store_true",
                        help="writers answer differently each time they are asked (as real "
                             "models do at temperature 0.8): the runs cannot be equal, only "
                             "complete and consistent with their shards")
    parser.add_argument("--provider-ignores-idempotency", dest="honours", action="store_false",
                        help="the fake ignores Idempotency-Key (as OpenAI does): calls in "
                             "flight at the kill are paid again, at most the shard's limits")
    parser.add_argument("--no-netns", dest="netns", action="store_false",
                        help="run the workers in the host's network (by default each has a "
                             "network namespace of its own where permitted: root)")
    parser.add_argument("--partition", action="store_true",
                        help="instead of killing the worker, cut its network link (its "
                             "namespace's) for longer than the heartbeat timeout, then restore "
                             "it: the stale attempt must give way to the re-sent one")
    parser.add_argument("--no-kill", dest="kill", action="store_false",
                        help="measure only: kill no worker")
    parser.add_argument("--disrupt", nargs="+", choices=DISRUPTIONS, default=None,
                        metavar="{kill,partition,edit}",
                        help="one sharded run per disruption, in this order, on the same "
                             "stack against the same single-process run (default: kill; "
                             "partition with --partition; none with --no-kill)")
    parser.add_argument("--edit-config", action="store_true",
                        help="every kill or partition also edits models.yaml and "
                             "benchmark.yaml mid-run (restored after it)")
    parser.add_argument("--limits", choices=("shared", "split"), default=None,
                        help="sharding.limits: each model's limits as Prefect global "
                             "concurrency limits all shards draw from (a killed or cut-off "
                             "shard's slots come back when their 60 s lease expires), or "
                             "divided among the shards (default shared; split with "
                             "--per-host-endpoints, where each host's server queues its "
                             "own requests)")
    parser.add_argument("--timeout", type=float, default=1500.0,
                        help="seconds for each run to finish")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep everything in this folder (default: a temporary one, "
                             "deleted on PASS)")
    args = parser.parse_args()
    per_host = args.per_host
    args.prompts = args.prompts or (160 if per_host else 48)
    args.shards = args.shards or (4 if per_host else 8)
    args.latency_ms = args.latency_ms if args.latency_ms is not None else (
        1000 if per_host else 50)
    args.workers = args.workers or (args.shards + 1 if per_host else 2)
    args.concurrency = args.concurrency or (args.capacity * args.shards if per_host else 8)
    args.limits = args.limits or ("split" if per_host else "shared")
    if args.repeat < 1 or (args.repeat > 1 and not per_host):
        parser.error("--repeat: at least 1, and only with --per-host-endpoints")
    if per_host and (args.disrupt or args.partition or args.also_shards or args.edit_config
                     or args.parallel or args.workers != args.shards + 1):
        parser.error("--per-host-endpoints measures one sharded run, one shard per worker "
                     "host (--shards + 1 workers), with no disruption")
    if args.disrupt is None:
        args.disrupt = ([] if per_host else ["partition"] if args.partition
                        else ["kill"] if args.kill else [])
    folder = (args.keep or Path(tempfile.mkdtemp(prefix="essaybench-scale-out-"))).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    parallel = args.parallel or (args.shards if per_host else 2 * args.workers)
    # SIGTERM (a caller's timeout, `kill`) ends the run through its finally blocks, so the
    # stack is stopped and nothing is left running (by default SIGTERM skips them)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # SIGKILL runs no finally block: a watcher stops the stack, kills every process this
    # run started and removes its namespaces once this process is gone (ops.reaper)
    reaper = Reaper.start()
    try:
        run(args, folder, parallel, reaper)
    except Failed as exc:
        print(f"outputs kept in {folder}")
        print(f"FAIL: {exc}")
        return 1
    finally:
        reaper.done()  # after every finally block of run(): all stopped, or said not
    if args.keep is None:
        shutil.rmtree(folder, ignore_errors=True)
    print("PASS")
    return 0


def run(args: argparse.Namespace, folder: Path, parallel: int, reaper: Reaper) -> None:
    writers = [f"writer-{i:02d}" for i in range(args.models)]
    scenario = FakeScenario.model_validate({
        "honour_idempotency_key": args.honours, "models": {"*": {
        "latency_ms": args.latency_ms, "reply": "template",
        "template": "{model}第{n}次写道：{prompt}" if args.varying else "{model}写道：{prompt}",
        "structured": "schema",
        "enforce_max_tokens": False}},
        "capacity": args.capacity if args.per_host else None})
    print(f"scale-out: {args.prompts} prompts x {args.models} writers, one judge, "
          f"{args.latency_ms} ms latency, concurrency {args.concurrency}; "
          f"{args.shards} shards on {args.workers} workers ({parallel} at once)"
          + (f"; one model server per worker host, {args.capacity} requests at once each"
             if args.per_host else ""), flush=True)
    with ExitStack() as stack_:
        net = isolated_network(args)
        reaper.record(stack_dir=folder / "stack", netns=net)
        if net is not None:
            stack_.callback(netns_gone, net)
        host = "127.0.0.1" if net is None else net.host_address
        # One server every worker reaches over the bridge (a provider), or with
        # --per-host-endpoints one per worker host, in its namespace, with a capacity
        servers = hosts_servers(stack_, scenario, args.workers, net) if args.per_host else \
            [stack_.enter_context(spawn_fake_server(scenario, host=host))]
        # A server that checks every request's signature (the runbook's object storage):
        # its one key, given to every worker, as on hosts with a bucket's credentials.
        s3 = stack_.enter_context(moto_s3(host, signed=True))
        assert s3.credentials is not None
        s3_env = {**s3.credentials, "AWS_DEFAULT_REGION": "us-east-1",
                  S3_ENDPOINT_ENV: s3.endpoint}
        os.environ.update(s3_env)
        parts_url = "s3://essaybench/team"
        ensure_bucket(parts_url)
        parts = PartStore(parts_url)
        store = Store(folder / "store")
        version = synthetic_prompt_set(store, args.prompts)
        common = {"provider": "fake", "family": "fake",
                  "base_url": SELF_HOSTED if args.per_host else servers[0].base_url,
                  "structured_output": "json_schema", "max_concurrency": args.concurrency,
                  "timeout_s": 60}
        (folder / "models.yaml").write_text(yaml.safe_dump({"models": {
            m: {**common, "model_id": m} for m in [*writers, "judge"]}}), "utf-8")
        (folder / "benchmark.yaml").write_text(yaml.safe_dump({
            "prompt_set": version, "generate": {"models": writers},
            "judge": {"judges": ["judge"]}, "stats": {"n_boot": 200},
            "sharding": {"shards": args.shards, "parallel": parallel,
                         "stale_after_s": STALE_S, "liveness": "parts",
                         "limits": args.limits,
                         "startup_grace_s": GRACE_S,
                         "retries": 2}}), "utf-8")
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")},
               **s3_env, "ESSAYBENCH_MODELS": str(folder / "models.yaml"),
               "ESSAYBENCH_BENCHMARK_CONFIG": str(folder / "benchmark.yaml"),
               "ESSAYBENCH_STORE": str(store.root), PARTS_URL_ENV: parts_url,
               "PREFECT_WORKER_QUERY_SECONDS": "1", "PREFECT_LOGGING_LEVEL": "WARNING"}
        if net is not None:  # a proxy in the environment must not take the bridge's traffic
            bypass = ",".join(filter(None, [os.environ.get("NO_PROXY"), host,
                                            *(net.address(k) for k in net.indices)]))
            env.update(NO_PROXY=bypass, no_proxy=bypass)
        # What differs between hosts: where each reaches the models (the runbook's variable)
        worker_env = {k: {ENDPOINTS_ENV: f"{SELF_HOSTED}={servers[k - 1].base_url}"}
                      for k in range(1, args.workers + 1)} if args.per_host else None
        t0 = time.perf_counter()
        api = stack_.enter_context(stack(folder, args.workers, parallel + 1, env, net,
                                         worker_env, store_worker=args.per_host))
        deploy(api, {**env, "PREFECT_HOME": str(folder / "stack" / "prefect-home")})
        stack_s = time.perf_counter() - t0
        print(f"stack up and deployed in {stack_s:.0f} s (PostgreSQL, Prefect server, "
              f"{args.workers} workers, moto, {len(servers)} fake server(s); in neither "
              "wall below)", flush=True)
        state = local_stack.read_state(folder / "stack")
        assert state is not None
        workers = {n: p for n, p in state.processes.items() if n.startswith("worker-")}
        healers: list[threading.Timer] = []
        stack_.callback(join_all, healers)
        edit = ConfigEdit(folder)
        stack_.callback(edit.restore)
        if net is not None:
            spaces = {name: namespace_of(pid) for name, pid in workers.items()}
            check(len(set(spaces.values()) | {namespace_of(os.getpid())}) == len(workers) + 1,
                  f"each worker in a network namespace of its own ({', '.join(net.namespaces)}"
                  f"; services on the bridge address {host}"
                  f"{', each model server in its worker namespace' if args.per_host else ''})")
        with temporary_settings(updates={PREFECT_API_URL: api}), \
                get_client(sync_client=True) as client:
            table: list[tuple[int, float, int, float]] = []
            plan: list[tuple[int, str | None]] = [
                *[(args.shards, kind) for kind in args.disrupt or [None]],
                *[(n, None) for n in args.also_shards]]
            # --per-host-endpoints --repeat R: R (single process, sharded) pairs on one
            # stack; the formula holds for the medians of T_1, T_n and S
            figures: list[tuple[float, float, float, float]] = []
            for n_shards, kind in [(0, None), *plan] * (args.repeat if args.per_host else 1):
                if n_shards == 0:
                    single = single_run(args, client, servers)
                    continue
                if healers:  # a partitioned worker: back on the network and polling first
                    join_all(healers)
                    wait_for(lambda: local_stack.online_workers(api, state.pool)
                             >= len(workers), 120, "every worker online again")
                paid_before, _ = fake_counts(servers)
                served_before = served(servers)
                sharded, run_id, killed, attempts, cost = sharded_run(
                    args, client, parts, workers, n_shards,
                    None if kind is None else disruption(
                        kind, workers, net, healers,
                        edit if kind == "edit" or args.edit_config else None),
                    any_worker=kind == "edit")
                edit.restore()
                verify(args, store, parts, servers, single.name, run_id, paid_before, killed,
                       writers, attempts, n_shards)
                wall_1, wall_n = seconds(single), seconds(sharded)
                per_shard = statistics.median(cost) if cost else 0.0
                print(f"wall: single process {wall_1:.1f} s; sharded {wall_n:.1f} s "
                      f"({len(attempts)} shards, {sum(attempts.values())} flow runs); shard "
                      f"start-up (created → running) median {per_shard:.1f} s, slowest "
                      f"{max(cost, default=0.0):.1f} s", flush=True)
                if args.per_host:
                    by_host = [a - b for a, b in zip(served(servers), served_before,
                                                     strict=True)]
                    check(all(by_host[1:]), f"each shard host's server served its shard: "
                          f"calls per host {by_host} (host 1 runs the pipeline: only its own "
                          f"calls, the judge's drift anchors after the assembly)")
                    peaks = [server.stats().totals.in_service_peak for server in servers]
                    check(max(peaks) <= args.capacity, f"no server served more than its "
                          f"capacity of {args.capacity} at once (peaks {peaks})")
                    figures.append((wall_1, wall_n, max(cost, default=0.0), per_shard))
                    if args.repeat > 1:
                        speedup(figures[-1:], n_shards, stack_s, final=False)
                    if len(figures) == args.repeat:
                        speedup(figures, n_shards, stack_s, final=True)
                table.append((len(attempts), wall_n, sum(attempts.values()), per_shard))
        if len(table) > 1 and not args.per_host:
            print(f"| shards | wall (single process {seconds(single):.0f} s) | flow runs | "
                  "start-up median |\n|---|---|---|---|")
            for n, wall, runs, startup in table:
                print(f"| {n} | {wall:.0f} s | {runs} | {startup:.0f} s |")


def hosts_servers(stack_: ExitStack, scenario: FakeScenario, workers: int,
                  net: netns.Netns | None) -> list[FakeServerHandle]:
    """One fake server per worker host (``--per-host-endpoints``): in worker k's network
    namespace on its address there (this process reads its counters over the bridge), or
    on 127.0.0.1 without namespaces; each on a port of its own."""
    return [stack_.enter_context(spawn_fake_server(
        scenario, host=net.address(k) if net is not None else "127.0.0.1",
        prefix=net.exec_prefix(k) if net is not None else ()))
        for k in range(1, workers + 1)]


def served(servers: list[FakeServerHandle]) -> list[int]:
    """Chat completions each server has answered (charged ones only)."""
    return [server.stats().totals.completed for server in servers]


def single_run(args: argparse.Namespace, client: SyncPrefectClient,
               servers: list[FakeServerHandle]) -> FlowRun:
    """The single-process reference run (``shards=0``), checked to have completed (with
    --per-host-endpoints: on one host's server only)."""
    served_before = served(servers)
    single = final(client, trigger(client, curate=False, shards=0), args.timeout)
    check(single.state is not None and single.state.is_completed(),
          f"single-process run {single.name}: {single.state_name}")
    if args.per_host:
        by_host = [a - b for a, b in zip(served(servers), served_before, strict=True)]
        check(by_host[0] > 0 and not any(by_host[1:]),
              f"the single-process run used one host's server: calls served per host "
              f"{by_host}")
    return single


def speedup(figures: list[tuple[float, float, float, float]], n: int, stack_s: float,
            final: bool) -> None:
    """The one formula (issue 31 item 7), on the medians of ``figures`` (T_1, T_n, S, the
    median shard's start-up): T_n <= (1/n + SLACK) * T_1 + S; asserted when ``final``."""
    wall_1, wall_n, startup, startup_median = (statistics.median(f[i] for f in figures)
                                               for i in range(4))
    factor = 1 / n + SLACK
    bound = factor * wall_1 + startup
    of = f"median of {len(figures)}: " if len(figures) > 1 else ""
    print(f"{of}T_1 = {wall_1:.1f} s (single process, one host's server); T_{n} = "
          f"{wall_n:.1f} s ({n} shards on {n} hosts); S = {startup:.1f} s (slowest shard's "
          f"start-up, the median shard's {startup_median:.1f} s); stack start {stack_s:.0f} s "
          f"(in neither); load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}",
          flush=True)
    what = (f"{of}T_{n} <= (1/{n} + {SLACK:.2f}) * T_1 + S: {wall_n:.1f} <= {factor:.2f} * "
            f"{wall_1:.1f} + {startup:.1f} = {bound:.1f} s (T_{n} / T_1 = "
            f"{wall_n / wall_1:.3f}; (T_{n} - S) / T_1 = {(wall_n - startup) / wall_1:.3f})")
    if final:
        check(wall_n <= bound, what)
    else:
        print(f"  {'    ' if wall_n <= bound else 'over'} {what}", flush=True)


def sharded_run(args: argparse.Namespace, client: SyncPrefectClient, parts: PartStore,
                workers: dict[str, int], n_shards: int, disrupt: Disrupt | None,
                any_worker: bool = False
                ) -> tuple[FlowRun, str, dict[str, Any], dict[int, int], list[float]]:
    """One sharded weekly run (disrupting a worker mid-run, if ``disrupt``): the flow run,
    the run id, what was done, attempts per shard, shard start-up seconds."""
    parent = trigger(client, curate=False, shards=n_shards)
    run_id = ""

    def named() -> bool:  # the pipeline names its flow run after the run id
        nonlocal run_id
        run_id = client.read_flow_run(parent).name
        return looks_like_run_id(run_id)

    wait_for(named, 120, "the sharded run's id")
    killed: dict[str, Any] = {}
    if disrupt is not None:
        killed = kill_one_shard_worker(client, parent, run_id, parts, workers, args.timeout,
                                       disrupt, any_worker)
        print(f"{killed['done']} while it ran shard(s) {killed['shards']}, "
              f"{len(killed['recorded'])} of their calls recorded", flush=True)
    sharded = final(client, parent, args.timeout)
    check(sharded.state is not None and sharded.state.is_completed(),
          f"sharded run {sharded.name} ({n_shards} shards): {sharded.state_name}")
    attempts: dict[int, int] = {}
    for r in shard_runs(client, run_id):
        index = shard_index(r)
        assert index is not None
        attempts[index] = attempts.get(index, 0) + 1
    return sharded, run_id, killed, attempts, startup_s(client, parts, run_id)


def verify(args: argparse.Namespace, store: Store, parts: PartStore,
           servers: list[FakeServerHandle], single: str, sharded: str, paid_before: Counts,
           killed: dict[str, Any],
           writers: list[str], attempts: dict[int, int], n_shards: int) -> None:
    plan = read_plan(parts, sharded)
    assert plan is not None
    check(len(plan.shards) >= min(n_shards, args.prompts * args.models),
          f"{len(plan.shards)} shards planned, each run as its own flow run "
          f"(attempts {dict(sorted(attempts.items()))})")
    judged = snapshot(store, sharded, "judge")
    essays = snapshot(store, sharded, "generate")
    cells = args.prompts * len(writers)
    check(essays.height == cells and set(essays["status"]) == {"ok"},
          f"every essay written: {essays.height} of {cells}")
    check(judged.height == cells and set(judged["status"]) == {"ok"},
          f"every essay judged: {judged.filter(pl.col('status') == 'ok').height} of {cells}")
    for stage in ("generate", "judge") if not args.varying else ():
        ours = stable_rows(snapshot(store, sharded, stage), ROW_KEYS[stage])
        theirs = stable_rows(snapshot(store, single, stage), ROW_KEYS[stage])
        differs = first_difference(ours, theirs, ROW_KEYS[stage])
        check(differs is None, f"merged {stage} snapshot equals the single-process run's "
              f"({ours.height} rows){'' if differs is None else ': ' + differs}")
    after, tokens = fake_counts(servers)
    zero = (0, 0)
    delta = {k: tuple(a - b for a, b in zip(n, paid_before.get(k, zero), strict=True))
             for k, n in after.items()}
    # A ledger row's key hashes the request, not the body the fake hashes; the header the
    # call carried (run, key, re-ask) is what links the two.
    arrivals: dict[str, list[int]] = {}
    for header, n in tokens.items():
        arrivals.setdefault(token_of_header(header), []).append(n)
    recorded = killed.get("recorded", set())
    resent = sorted(k for k in recorded
                    if max(arrivals.get(idempotency_token(sharded, k), [0])) != 1)
    if killed:
        check(bool(recorded) and not resent,
              f"every call the disrupted shard recorded ({len(recorded)}) was served from its "
              f"ledger, not sent again{'' if not resent else f': {len(resent)} were'}")
    twice = sorted(k for k, n in delta.items() if n[0] > 1)
    paid = sum(1 for n in delta.values() if n[0] >= 1)
    replayed = sum(n[1] for n in delta.values())
    if args.honours:
        check(not twice, f"no call paid twice: {paid} calls paid once; {replayed} re-sent "
              "(in flight at the disruption) answered from the provider's Idempotency-Key "
              f"record, uncharged{'' if not twice else f'; PAID TWICE: {len(twice)}'}")
    else:
        # In flight at the kill: each killed shard's writer and judge limits.
        bound = len(killed.get("shards", [])) * 2 * args.concurrency
        check(len(twice) <= bound, f"calls paid twice: {len(twice)} (the provider ignores "
              f"Idempotency-Key; in flight at the kill: at most {bound})")


if __name__ == "__main__":
    sys.exit(main())
