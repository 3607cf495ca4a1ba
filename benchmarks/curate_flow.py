"""Wall time of the whole ``curate`` flow, Prefect start-up included.

Each repeat is a fresh process (``essaybench curate``) with a fresh Prefect home and
store, as a newcomer's first run would be.

- Default: the bundled sample (``data/sources.yaml``). Target: ≤ 60 s on this 2-core machine.
- ``--records N``: a generated chat log of N raw records (``curate_corpus``: essay
  requests whose wording varies, with planted exact and near duplicates and pairs of
  known ROUGE-L around 0.7, among other chat requests, conversations and broken lines),
  curated with the project's ``configs/curate.yaml`` parameters. Prints the time and
  peak memory (RSS of the command's process tree, sampled every 0.1 s) of each stage and
  of the whole run, the recall of the planted duplicates, and an exact check that no
  pair of published prompts reaches ROUGE-L 0.7 (``curate_check``). Targets (issue 29,
  2 cores): 50,000 records ≤ 90 s, 1,000,000 ≤ 15 min, ≤ 4 GiB; recall ≥ 98%;
  0 published pairs at or above 0.7; collect and filter stream, so each adds at most
  512 MiB over the memory it started with, at any size.

    python benchmarks/curate_flow.py --repeats 3
    python benchmarks/curate_flow.py --records 50000
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import psutil  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from benchmarks.curate_check import outcomes, recall, rouge_check, stage_costs
from benchmarks.curate_corpus import ChatLog, write_chat_log
from essaybench.store import Store

TARGET_S = 60.0
TARGET_50K_S = 90.0
TARGET_1M_S = 15 * 60.0
TARGET_BYTES = 4 * 1024**3
# Collect and filter stream (issue 29 item 1): what each adds over the memory it started
# with is one batch and its memos, whatever the number of records.
STREAM_GROWTH_BYTES = 512 * 1024**2
STREAMED = ("collect", "filter")
RECALL_TARGET = 0.98
PROJECT = Path(__file__).resolve().parents[1]


def generated_config(folder: Path, records: int, seed: int) -> tuple[Path, ChatLog]:
    log = write_chat_log(folder / "chat.jsonl", records, seed)
    (folder / "sources.yaml").write_text(
        "sources:\n  - {name: chat, kind: chat_jsonl, path: chat.jsonl}\n", encoding="utf-8")
    project = (PROJECT / "configs" / "curate.yaml").read_text(encoding="utf-8")
    config = folder / "curate.yaml"
    config.write_text(project.replace("../data/sources.yaml", str(folder / "sources.yaml"))
                      .replace("../data/overrides.yaml",
                               str(PROJECT / "data" / "overrides.yaml")), encoding="utf-8")
    return config, log


class PeakMemory:
    """The largest total RSS of a process and its descendants, sampled every 0.1 s;
    ``samples`` keeps (epoch seconds, bytes) so a stage's own peak can be read off."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.peak = 0
        self.samples: list[tuple[float, int]] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.is_set():
            total = 0
            try:
                for proc in (self.root, *self.root.children(recursive=True)):
                    total += proc.memory_info().rss
            except psutil.Error:  # a process ended between listing and reading
                pass
            self.peak = max(self.peak, total)
            self.samples.append((time.time(), total))
            self._done.wait(0.1)

    def stop(self) -> int:
        self._done.set()
        self._thread.join()
        return self.peak


@dataclass
class Run:
    seconds: float
    peak: int
    cpu: float
    out: str
    samples: list[tuple[float, int]] = field(default_factory=list)


def one_run(essaybench: str, config: Path | None = None,
            inspect: Callable[[Store, Run], None] | None = None) -> Run:
    """One ``essaybench curate`` in a fresh home and store: wall and CPU seconds (user +
    system, of the command and the processes it waited for: what the run costs when the
    shared machine is busy and wall time does not), peak memory, stdout; ``inspect`` reads
    the store before it is removed."""
    tmp = Path(tempfile.mkdtemp(prefix="eb-bench-"))
    env = {**os.environ, "PREFECT_HOME": str(tmp / "prefect"), "DO_NOT_TRACK": "1",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "COLUMNS": "120"}
    command = [essaybench, "curate", "--store", str(tmp / "store")]
    if config is not None:
        command += ["--config", str(config)]
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        memory = PeakMemory(proc.pid)
        out, err = proc.communicate()
        seconds, peak = time.perf_counter() - t0, memory.stop()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if proc.returncode != 0:
            sys.exit(f"essaybench curate failed (exit {proc.returncode}): {err.strip()[-500:]}")
        run = Run(seconds, peak, cpu, out, memory.samples)
        if inspect is not None:
            inspect(Store(tmp / "store"), run)
        return run
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def targets(records: int) -> tuple[float | None, str, int]:
    """The wall-time target for this size (None above 1,000,000), how it was set, and the
    memory target. The issue sets 90 s at 50,000 and 15 minutes at 1,000,000; a size in
    between gets the straight line through the two (on track for both, if time grows
    linearly)."""
    if records <= 50_000:
        return TARGET_50K_S, "issue 29", TARGET_BYTES
    if records <= 1_000_000:
        share = (records - 50_000) / (1_000_000 - 50_000)
        exact = records == 1_000_000
        return (TARGET_50K_S + share * (TARGET_1M_S - TARGET_50K_S),
                "issue 29" if exact else "pro rata between 50,000 and 1,000,000", TARGET_BYTES)
    return None, "none above 1,000,000", TARGET_BYTES


def report(records: int, seed: int, log: ChatLog, store: Store, run: Run) -> bool:
    """Print the stage costs, recall and ROUGE-L check; True when every target is met."""
    gib = 1024**3
    costs = stage_costs(store, run.samples)
    print(f"curate flow on {records:,} generated records (seed {seed}): {run.seconds:.1f} s "
          f"({run.cpu:.0f} CPU-s; load average {os.getloadavg()[0]:.1f}), peak memory "
          f"{run.peak / gib:.2f} GiB (process tree)")
    in_stages = sum(c.seconds for c in costs)
    mib = 1024**2
    for c in costs:
        print(f"  {c.stage:<9} {c.seconds:7.1f} s   peak {c.peak_bytes / gib:5.2f} GiB "
              f"(+{c.growth_bytes / mib:5.0f} MiB over its start)")
    print(f"  {'other':<9} {run.seconds - in_stages:7.1f} s   (Prefect start-up, publish)")
    dedup, rouge = (store.latest_ok_snapshot(s) for s in ("dedup", "rouge"))
    if dedup is not None and rouge is not None:
        d, r = dedup.meta, rouge.meta
        print(f"  dedup: {d['n_input']:,} rows, {d['n_unique']:,} unique, "
              f"{d.get('n_after_minhash', d['n_unique']):,} after MinHash "
              f"({d.get('minhash_candidates', 0):,} LSH candidates), k {d['chosen_k']}, "
              f"{d.get('blocks', '?')} blocks (largest {d.get('largest_block', '?')}), "
              f"{d['pairs_compared']:,} pairs in blocks; seconds {d['seconds']}")
        print(f"  rouge: {r['n_in']:,} rows, {r['n_dropped']:,} dropped, {r['n_bound']:,} pairs "
              f"bounded, {r['n_lcs']:,} LCS; segment {r['seconds_segment']} s, prune "
              f"{r['seconds_prune']} s")
    funnel = [line.strip() for line in run.out.splitlines() if line.startswith("raw ")]
    print(f"funnel: {funnel[0] if funnel else '(not printed)'}")
    table = outcomes(store)
    found = recall(log, table)
    for role in ("exact", "near", "rouge_hi", "rouge_lo"):
        r = found[role]
        print(f"  planted {role:<8} {r['planted']:>7,}; both reached dedup "
              f"{r['reached_dedup']:>7,}; pair removed {r['pair_removed']:>7,}; copy dropped "
              f"{r['dropped']:>7,} {r['by']}")
    print(f"  distinct prompts dropped as duplicates: {sum(found['bases_dropped'].values()):,} "
          f"of {found['bases']:,} {found['bases_dropped']}")
    classify = store.latest_ok_snapshot("classify")
    assert classify is not None
    published = classify.read().filter(pl.col("decision") == "kept")
    check = rouge_check(published, log, table)
    print(f"ROUGE-L check of the published set: {check['published']:,} prompts, "
          f"{check['pairs']:,} pairs ({check['random_pairs']:,} random, {check['lsh_pairs']:,} "
          f"more from LSH, {check['planted_pairs']:,} planted); max F {check['max_f']!r}; "
          f"pairs ≥ 0.7: {check['at_or_above']}; rouge-chinese agrees on "
          f"{check['reference_checked'] - check['reference_mismatches']} of "
          f"{check['reference_checked']}")
    time_target, how, memory_target = targets(records)
    verdicts = {
        "time": time_target is None or run.seconds <= time_target,
        "memory": run.peak <= memory_target,
        "recall": found["recall"] >= RECALL_TARGET,
        "rouge": check["at_or_above"] == 0 and check["reference_mismatches"] == 0,
        "streamed": all(c.growth_bytes <= STREAM_GROWTH_BYTES for c in costs
                        if c.stage in STREAMED),
    }
    growth = ", ".join(f"{c.stage} +{c.growth_bytes / mib:.0f} MiB" for c in costs
                       if c.stage in STREAMED)
    shown = how if time_target is None else f"≤ {time_target:.0f} s, {how}"
    print(f"targets: time {run.seconds:.1f} s ({shown}) {_ok(verdicts['time'])}; peak "
          f"{run.peak / gib:.2f} GiB (≤ {memory_target / gib:.0f} GiB) {_ok(verdicts['memory'])};"
          f" planted-duplicate recall {found['recall']:.2%} (near duplicates alone "
          f"{found['near_recall']:.2%}; copy itself dropped {found['strict']:.2%}; "
          f"≥ {RECALL_TARGET:.0%}) {_ok(verdicts['recall'])}; "
          f"published pairs ≥ 0.7: {check['at_or_above']} (0) {_ok(verdicts['rouge'])}; "
          f"streamed stages' own memory {growth} (≤ {STREAM_GROWTH_BYTES / mib:.0f} MiB "
          f"each, at any size) {_ok(verdicts['streamed'])}")
    ok = all(verdicts.values())
    print("PASS" if ok else "FAIL")
    return ok


def _ok(passed: bool) -> str:
    return "PASS" if passed else "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--records", type=int, default=None,
                        help="curate a generated chat log of this many records")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    essaybench = shutil.which("essaybench") or str(Path(sys.executable).parent / "essaybench")
    if args.records is None:
        times = [one_run(essaybench).seconds for _ in range(args.repeats)]
        med = statistics.median(times)
        verdict = "PASS" if med <= TARGET_S else "FAIL"
        print(f"curate flow on bundled sample: runs {', '.join(f'{t:.1f}' for t in times)} s; "
              f"median {med:.1f} s (target ≤ {TARGET_S:.0f} s): {verdict}")
        return
    passed: list[bool] = []
    with tempfile.TemporaryDirectory(prefix="eb-records-") as folder:
        t0 = time.perf_counter()
        config, log = generated_config(Path(folder), args.records, args.seed)
        print(f"generated {args.records:,} records in {time.perf_counter() - t0:.1f} s")
        one_run(essaybench, config,
                lambda store, run: passed.append(report(args.records, args.seed, log, store, run)))
    sys.exit(0 if all(passed) else 1)


if __name__ == "__main__":
    main()
