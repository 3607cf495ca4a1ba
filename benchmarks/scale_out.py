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

Figures: wall time of each run (the flow run's start to end, from Prefect), the shards'
start-up cost (flow run created → shard code running), and the ratio of the sharded wall
to the single-process wall plus that cost.

    python benchmarks/scale_out.py [--prompts 48] [--models 4] [--shards 8]
                                   [--also-shards 2 4 16] [--latency-ms 50]
                                   [--concurrency 8] [--no-kill] [--varying] [--keep DIR]
                                   [--provider-ignores-idempotency] [--no-netns]
                                   [--partition | --disrupt {kill,partition} ...]

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
DISRUPTIONS = ("kill", "partition")


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
          net: netns.Netns | None) -> Iterator[str]:
    """The local stack (PostgreSQL, Prefect server, pool, workers, each worker in a network
    namespace of ``net`` if given); its API URL. Stopped at the end, and checked to have
    left nothing running (no process, namespace or link)."""
    state_dir = folder / "stack"
    try:
        # Each worker takes at most its share of the pool: the pipeline's worker cannot
        # take every shard too, so a disruption always finds one on another worker.
        state = local_stack.start(state_dir, workers, pool_limit, ui=False, timeout=240,
                                  env=env, netns=net if net is not None else False,
                                  worker_limit=-(-pool_limit // workers))
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
                          timeout: float, disrupt: Disrupt) -> dict[str, Any]:
    """Wait until a worker other than the parent's runs a shard that has recorded calls,
    then disrupt it (kill it, or cut it off); what was done and which calls its shards had
    recorded."""
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
            if index is not None and worker and worker != parent_worker and parts.list(
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


def disruption(kind: str, workers: dict[str, int], net: netns.Netns | None,
               healers: list[threading.Timer]) -> Disrupt:
    """``kill``: ``kill -9`` of a worker and what it started; ``partition``: its network
    link cut for PARTITION_S and then restored (the worker and its flow runs live on; the
    timer that restores it goes to ``healers``)."""
    if kind == "kill":
        return lambda name: f"killed {name} (pids {kill_worker(workers[name])})"
    if net is None:
        raise Failed("a partition needs the workers in network namespaces (root)")

    def cut(name: str) -> str:
        k = int(name.removeprefix("worker-"))
        netns.cut(net, k)
        healer = threading.Timer(PARTITION_S, netns.heal, (net, k))
        healer.start()
        healers.append(healer)
        return f"cut {name} off the network for {PARTITION_S:g} s"
    return cut



def join_all(threads: list[threading.Timer]) -> None:
    for thread in threads:
        thread.join()


def netns_gone(net: netns.Netns) -> None:
    left = netns.teardown(net)  # the stack's stop removed them; this is the safety net
    check(not left, f"network namespaces removed{'' if not left else f': left {left}'}")


def namespace_of(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


Counts = dict[str, tuple[int, int]]  # per request body: completed (paid), replayed


def fake_counts(server: FakeServerHandle) -> tuple[Counts, dict[str, int]]:
    """The fake's counters per request body, and its arrivals per Idempotency-Key."""
    stats = server.stats(per_key=True)
    return ({k: (v.completed, v.replayed) for k, v in (stats.per_key or {}).items()},
            dict(stats.per_token or {}))


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
    parser.add_argument("--prompts", type=int, default=48)
    parser.add_argument("--models", type=int, default=4)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--latency-ms", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--also-shards", type=int, nargs="*", default=[], metavar="N",
                        help="after the first sharded run, one more (no kill) per count, on "
                             "the same stack; prints a table of wall time by shard count")
    parser.add_argument("--workers", type=int, default=2)
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
                        metavar="{kill,partition}",
                        help="one sharded run per disruption, in this order, on the same "
                             "stack against the same single-process run (default: kill; "
                             "partition with --partition; none with --no-kill)")
    parser.add_argument("--limits", choices=("shared", "split"), default="shared",
                        help="sharding.limits: each model's limits as Prefect global "
                             "concurrency limits all shards draw from (a killed or cut-off "
                             "shard's slots come back when their 60 s lease expires), or "
                             "divided among the shards")
    parser.add_argument("--timeout", type=float, default=1500.0,
                        help="seconds for each run to finish")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep everything in this folder (default: a temporary one, "
                             "deleted on PASS)")
    args = parser.parse_args()
    if args.disrupt is None:
        args.disrupt = ["partition"] if args.partition else ["kill"] if args.kill else []
    folder = (args.keep or Path(tempfile.mkdtemp(prefix="essaybench-scale-out-"))).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    parallel = args.parallel or 2 * args.workers
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
        "enforce_max_tokens": False}}})
    print(f"scale-out: {args.prompts} prompts x {args.models} writers, one judge, "
          f"{args.latency_ms} ms latency, concurrency {args.concurrency}; "
          f"{args.shards} shards on {args.workers} workers ({parallel} at once)", flush=True)
    with ExitStack() as stack_:
        net = isolated_network(args)
        reaper.record(stack_dir=folder / "stack", netns=net)
        if net is not None:
            stack_.callback(netns_gone, net)
        host = "127.0.0.1" if net is None else net.host_address
        server = stack_.enter_context(spawn_fake_server(scenario, host=host))
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
        common = {"provider": "fake", "base_url": server.base_url, "family": "fake",
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
            bypass = ",".join(filter(None, [os.environ.get("NO_PROXY"), host]))
            env.update(NO_PROXY=bypass, no_proxy=bypass)
        t0 = time.perf_counter()
        api = stack_.enter_context(stack(folder, args.workers, parallel + 1, env, net))
        deploy(api, {**env, "PREFECT_HOME": str(folder / "stack" / "prefect-home")})
        print(f"stack up and deployed in {time.perf_counter() - t0:.0f} s "
              f"(PostgreSQL, Prefect server, {args.workers} workers, moto, fake server)",
              flush=True)
        state = local_stack.read_state(folder / "stack")
        assert state is not None
        workers = {n: p for n, p in state.processes.items() if n.startswith("worker-")}
        healers: list[threading.Timer] = []
        stack_.callback(join_all, healers)
        if net is not None:
            spaces = {name: namespace_of(pid) for name, pid in workers.items()}
            check(len(set(spaces.values()) | {namespace_of(os.getpid())}) == len(workers) + 1,
                  f"each worker in a network namespace of its own ({', '.join(net.namespaces)}"
                  f"; services on the bridge address {host})")
        with temporary_settings(updates={PREFECT_API_URL: api}), \
                get_client(sync_client=True) as client:
            single = final(client, trigger(client, curate=False, shards=0), args.timeout)
            check(single.state is not None and single.state.is_completed(),
                  f"single-process run {single.name}: {single.state_name}")
            table: list[tuple[int, float, int, float]] = []
            plan: list[tuple[int, str | None]] = [
                *[(args.shards, kind) for kind in args.disrupt or [None]],
                *[(n, None) for n in args.also_shards]]
            for n_shards, kind in plan:
                if healers:  # a partitioned worker: back on the network and polling first
                    join_all(healers)
                    wait_for(lambda: local_stack.online_workers(api, state.pool)
                             >= len(workers), 120, "every worker online again")
                paid_before, _ = fake_counts(server)
                sharded, run_id, killed, attempts, cost = sharded_run(
                    args, client, parts, workers, n_shards,
                    None if kind is None else disruption(kind, workers, net, healers))
                verify(args, store, parts, server, single.name, run_id, paid_before, killed,
                       writers, attempts, n_shards)
                wall_1, wall_n = seconds(single), seconds(sharded)
                per_shard = statistics.median(cost) if cost else 0.0
                startup_total = sum(cost) / parallel
                print(f"wall: single process {wall_1:.1f} s; sharded {wall_n:.1f} s "
                      f"({len(attempts)} shards, {sum(attempts.values())} flow runs); shard "
                      f"start-up median {per_shard:.1f} s (created → running), "
                      f"{startup_total:.1f} s of wall at {parallel} at once")
                ratio = wall_n / (wall_1 + startup_total)
                how = "cut off" if kind == "partition" else "killed"
                print(f"sharded / (single + start-up) = {ratio:.3f} (within 1.15x: "
                      f"{ratio <= 1.15}){f' (a worker was {how})' if killed else ''}",
                      flush=True)
                table.append((len(attempts), wall_n, sum(attempts.values()), per_shard))
        if len(table) > 1:
            print(f"| shards | wall (single process {seconds(single):.0f} s) | flow runs | "
                  "start-up median |\n|---|---|---|---|")
            for n, wall, runs, startup in table:
                print(f"| {n} | {wall:.0f} s | {runs} | {startup:.0f} s |")


def sharded_run(args: argparse.Namespace, client: SyncPrefectClient, parts: PartStore,
                workers: dict[str, int], n_shards: int, disrupt: Disrupt | None
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
                                       disrupt)
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


def verify(args: argparse.Namespace, store: Store, parts: PartStore, server: FakeServerHandle,
           single: str, sharded: str, paid_before: Counts, killed: dict[str, Any],
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
    after, tokens = fake_counts(server)
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
