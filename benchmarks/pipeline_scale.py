"""The weekly pipeline at the paper's scale, on the fake server (issue 4, item 10).

728 prompts × 15 models = 10,920 essays and 10,920 judgments (one judge), 300 ms
server latency, concurrency 64 per model, run by the real ``pipeline`` flow (generate
→ judge → aggregate → stats) under a Prefect engine with its own temporary home. Prints:

* wall time of the flow against the ideal: Σ over stages of the slowest model's
  calls × latency / concurrency (generate: 728 × 0.3 / 64; judge: 10,920 × 0.3 / 64),
  target ≤ 1.1× (``TARGET_RATIO``);
* peak RSS of this process (the pipeline), target ≤ 1 GiB (``TARGET_PEAK_MIB``);
* Prefect task runs and flow runs created;
* time outside LLM calls: wall minus the union of the ledger's call intervals (the
  stretches with at least one request in flight), split by stage from the catalog
  (generate, judge, aggregate, and the stats stage that ends every pipeline run; its
  time counts in the wall too);
* CPU seconds of the pipeline process and of the fake server (they share the machine);
* with ``--repeats N`` (default 3) each run on a fresh store, then the median.

    python benchmarks/pipeline_scale.py [--prompts 728] [--models 15] [--latency-ms 300]
                                        [--concurrency 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import yaml

from essaybench.core.contracts import StageOutput
from essaybench.core.hashing import sha256_hex
from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, spawn_fake_server
from essaybench.store import Store
from essaybench.store.run_stage import run_stage

GENRES = {"argumentative": "议论文", "narrative": "记叙文", "descriptive": "描写文",
          "expository": "说明文"}
TOPICS = ("门", "远方", "灯", "雨后", "老街", "种子", "回声", "桥", "风筝", "书架", "河流", "钟声")
# Issue 25 item 7: what the pipeline did before a round of per-call additions made it
# CPU-bound (1.091x, 933 MiB); a regression past these prints FAIL.
TARGET_RATIO = 1.1
TARGET_PEAK_MIB = 1024


def synthetic_prompt_set(store: Store, n: int) -> str:
    """Publish ``n`` distinct prompts (4 genres × Open/Constrained) as a prompt-set version."""
    rows = []
    genres = list(GENRES)
    for i in range(n):
        genre = genres[i % 4]
        constrained = (i // 4) % 2 == 1
        topic = TOPICS[i % len(TOPICS)]
        text = (f"第{i}题：以“{topic}”为题，写一篇{GENRES[genre]}"
                + ("，不少于800字。" if constrained else "。"))
        rows.append({"prompt_id": sha256_hex(text)[:16], "text": text, "genre": genre,
                     "prompt_set": "constrained" if constrained else "open",
                     "decision": "kept"})
    prompts = pl.DataFrame(rows)
    snap = run_stage(store, run_id="bench-setup", stage="classify", upstream=[], params={},
                     compute=lambda: StageOutput(prompts))
    version = "ps-bench-" + sha256_hex(str(n))[:8]
    folder = store.root / "prompt_sets" / version
    folder.mkdir(parents=True)
    prompts.drop("decision").write_parquet(folder / "prompts.parquet")
    store.record_prompt_set({
        "version": version, "snapshot_id": snap.snapshot_id, "run_id": "bench-setup",
        "n_prompts": n, "counts": {}, "funnel": {}, "jsonl_path": "",
        "parquet_path": str((folder / "prompts.parquet").relative_to(store.root))})
    return version


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def union_seconds(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of [start, end] intervals."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def call_intervals(ledger: Path) -> list[tuple[str, float, float]]:
    """(stage, start, end) of every call in the ledger, epoch seconds."""
    with duckdb.connect(str(ledger), read_only=True) as con:
        rows = con.execute("select stage, epoch(started_at), epoch(finished_at) "
                           "from llm_calls").fetchall()
    return [(str(s), float(a), float(b)) for s, a, b in rows]


def stage_windows(store: Path, run_id: str) -> dict[str, tuple[float, float]]:
    with duckdb.connect(str(store / "catalog.duckdb"), read_only=True) as con:
        rows = con.execute("select stage, epoch(started_at), epoch(ended_at) from "
                           "stage_runs where run_id = ?", [run_id]).fetchall()
    return {str(s): (float(a), float(b)) for s, a, b in rows}


def busy_within(calls: list[tuple[str, float, float]], window: tuple[float, float]) -> float:
    """Seconds of ``window`` with at least one call (of any stage) in flight."""
    lo, hi = window
    return union_seconds([(max(a, lo), min(b, hi)) for _, a, b in calls if b > lo and a < hi])


async def prefect_counts() -> tuple[int, int]:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        # The API's own counters (a filter read is capped at 200 rows).
        response = await client._client.post("/task_runs/count", json={})
        flows = await client.count_flow_runs()
    return int(response.json()), flows


@dataclass
class Run:
    wall: float
    cpu: float
    server_cpu: float
    outside: float


def run_once(args: argparse.Namespace, folder: Path, server: FakeServerHandle,
             writers: list[str]) -> Run:
    """One pipeline flow over a fresh store in ``folder``; prints its figures."""
    from essaybench.flows.pipeline import pipeline_flow

    store = Store(folder / "store")
    version = synthetic_prompt_set(store, args.prompts)
    (folder / "benchmark.yaml").write_text(yaml.safe_dump({
        "prompt_set": version, "generate": {"models": writers},
        "judge": {"judges": ["judge"]}}), "utf-8")
    server_cpu0 = server.stats().totals.cpu_s
    received0 = server.stats().totals.received
    t0, cpu0, started_at = time.perf_counter(), _cpu_s(), time.time()
    out = pipeline_flow(str(folder / "benchmark.yaml"),
                        str(PROJECT_ROOT / "configs" / "curate.yaml"), str(store.root), False)
    wall, cpu = time.perf_counter() - t0, _cpu_s() - cpu0
    totals = server.stats().totals
    server_cpu, received = totals.cpu_s - server_cpu0, totals.received - received0

    lat = args.latency_ms / 1000
    ideal = {"generate": args.prompts * lat / args.concurrency,
             "judge": args.prompts * args.models * lat / args.concurrency}
    calls = call_intervals(store.root / "ledger.duckdb")
    windows = stage_windows(store.root, out["run_id"])
    ratio = wall / sum(ideal.values())
    n = args.prompts * args.models
    print(f"scale: {args.prompts} prompts x {args.models} models = {n} essays + {n} "
          f"judgments; {received} requests received by the fake server")
    print(f"wall {wall:.1f} s (ideal {sum(ideal.values()):.1f} s = generate "
          f"{ideal['generate']:.1f} + judge {ideal['judge']:.1f}); {ratio:.3f}x "
          f"(target <= {TARGET_RATIO}x: {'PASS' if ratio <= TARGET_RATIO else 'FAIL'})")
    judge_start = windows["judge"][0]
    judge_calls = [(a, b) for s, a, b in calls if s == "judge"]
    prefetched = sum(a < judge_start for a, _ in judge_calls)
    print(f"judge calls: {prefetched} prefetched during generation, "
          f"{len(judge_calls) - prefetched} sent by the judge stage")
    for stage in ("generate", "judge", "aggregate", "pairwise", "stats"):
        if stage not in windows:  # pairwise runs only when configured
            continue
        lo, hi = windows[stage]
        busy = busy_within(calls, (lo, hi))
        line = (f"  {stage}: stage {hi - lo:.1f} s, LLM calls in flight {busy:.1f} s, "
                f"outside calls {hi - lo - busy:.1f} s")
        if stage == "generate":
            own = union_seconds([(a, b) for s, a, b in calls if s == stage])
            line += f"; generate calls {own:.1f} s (ideal {ideal[stage]:.1f} s)"
        print(line)
    in_stages = sum(hi - lo for lo, hi in windows.values())
    edges = [started_at, *[t for lo, hi in sorted(windows.values()) for t in (lo, hi)],
             started_at + wall]
    gaps = ", ".join(f"{b - a:.2f}" for a, b in zip(edges[::2], edges[1::2], strict=True))
    print(f"  between stages (Prefect flow and tasks, gateway/ledger opening and closing, "
          f"catalog look-ups): {wall - in_stages:.1f} s (before, between and after the "
          f"stages: {gaps})")
    outside = wall - union_seconds([(a, b) for _, a, b in calls])
    print(f"time outside LLM calls: {outside:.1f} s of {wall:.1f} s (Prefect, snapshots, "
          f"catalog, ledger reads, aggregation)")
    print(f"CPU during the flow: pipeline process {cpu:.1f} s ({cpu / (2 * n) * 1000:.2f} ms "
          f"per LLM call, everything included), fake server {server_cpu:.1f} s "
          f"({server_cpu / max(received, 1) * 1000:.2f} ms per request); 2 cores for "
          f"{wall:.1f} s = {2 * wall:.0f} CPU-seconds")
    print(f"outputs kept in {folder}")
    return Run(wall, cpu, server_cpu, outside)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=728)
    parser.add_argument("--models", type=int, default=15)
    parser.add_argument("--latency-ms", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3,
                        help="pipeline runs (fresh store each, one Prefect engine); the "
                             "summary quotes their median")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="essaybench-scale-"))
    os.environ.update({"PREFECT_HOME": str(tmp / "prefect"), "DO_NOT_TRACK": "1",
                       "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                       "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
                       "PREFECT_LOGGING_LEVEL": "WARNING"})
    writers = [f"writer-{i:02d}" for i in range(args.models)]
    scenario = FakeScenario.model_validate({"models": {"*": {
        "latency_ms": args.latency_ms, "reply": "template", "template": "{model}第{n}篇：{prompt}",
        "structured": "schema", "enforce_max_tokens": False}}})
    runs: list[Run] = []
    with spawn_fake_server(scenario) as server:
        common: dict[str, Any] = {"provider": "fake", "base_url": server.base_url,
                                  "family": "fake", "structured_output": "json_schema",
                                  "max_concurrency": args.concurrency, "timeout_s": 60}
        registry = {m: {**common, "model_id": m} for m in [*writers, "judge"]}
        (tmp / "models.yaml").write_text(yaml.safe_dump({"models": registry}), "utf-8")
        os.environ["ESSAYBENCH_MODELS"] = str(tmp / "models.yaml")

        from prefect import flow

        @flow(name="warm-up")
        def warm_up() -> None:
            """Start the ephemeral Prefect server before the clock starts."""

        t0 = time.perf_counter()
        warm_up()
        cold = time.perf_counter() - t0
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        for i in range(args.repeats):
            print(f"== run {i + 1} of {args.repeats}")
            runs.append(run_once(args, tmp / f"run{i + 1}", server, writers))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tasks, flows = asyncio.run(prefect_counts())

    ideal = (args.prompts * (1 + args.models)) * args.latency_ms / 1000 / args.concurrency
    wall = statistics.median(r.wall for r in runs)
    print(f"== median of {len(runs)} runs: wall {wall:.1f} s = "
          f"{wall / ideal:.3f}x the ideal {ideal:.1f} s (target <= {TARGET_RATIO}x: "
          f"{'PASS' if wall / ideal <= TARGET_RATIO else 'FAIL'}; runs "
          f"{', '.join(f'{r.wall:.1f}' for r in runs)}); outside LLM calls "
          f"{statistics.median(r.outside for r in runs):.1f} s; CPU pipeline "
          f"{statistics.median(r.cpu for r in runs):.1f} s, fake server "
          f"{statistics.median(r.server_cpu for r in runs):.1f} s")
    print(f"peak RSS of the pipeline process {peak:.0f} MiB (after Prefect start "
          f"{rss0:.0f} MiB; target <= {TARGET_PEAK_MIB}: "
          f"{'PASS' if peak <= TARGET_PEAK_MIB else 'FAIL'})")
    print(f"Prefect: {tasks} task runs, {flows} flow runs in all (per pipeline run: "
          f"{(tasks) / len(runs):.0f} task runs; cold engine start {cold:.1f} s, not in the "
          "wall time)")


if __name__ == "__main__":
    main()
