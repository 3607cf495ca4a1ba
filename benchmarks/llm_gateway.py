"""The gateway at scale against the fake server (in its own process).

1. 10,000 calls, 200 ms server latency, concurrency 64: wall time against the ideal
   (10,000 × 0.2 s / 64 ≈ 31 s; target ≤ 1.1×) and client CPU per call (target ≤ 0.8 ms,
   issue 25 item 7: it was 0.77 ms before a round of per-call additions).
2. The same with 10% injected transient faults (429 with Retry-After, 500, 503,
   dropped connections, truncated bodies): zero lost calls, zero requests completed
   twice (server-side count), ledger complete.

    python benchmarks/llm_gateway.py [--calls 10000] [--latency-ms 200] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import duckdb

from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import spawn_fake_server
from essaybench.llm.gateway import Gateway, run_async
from essaybench.llm.ledger import Ledger
from essaybench.llm.registry import ModelSpec, Registry
from essaybench.llm.retry import Backoff
from essaybench.llm.types import ChatRequest, Message

FAULTS = [  # first match wins; each ~2% of arrivals, decided by a hash of (body, attempt)
    {"kind": "status", "status": 429, "retry_after": 0.5, "rate": 0.02, "seed": 1},
    {"kind": "status", "status": 500, "rate": 0.02 / 0.98, "seed": 2},
    {"kind": "status", "status": 503, "rate": 0.02 / 0.96, "seed": 3},
    {"kind": "drop", "rate": 0.02 / 0.94, "seed": 4},
    {"kind": "truncated_json", "rate": 0.02 / 0.92, "seed": 5},
]


TARGET_RATIO = 1.1
TARGET_CPU_MS = 0.8


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(calls: int, latency_ms: int, concurrency: int, faults: bool) -> dict[str, float]:
    scenario = FakeScenario.model_validate({
        "models": {"*": {"latency_ms": latency_ms, "reply": "template",
                         "template": "第{n}篇：{prompt}"}},
        "faults": FAULTS if faults else [],
    })
    spec = ModelSpec(name="fake", provider="fake", base_url="http://fake.invalid/v1",
                     model_id="bench", family="fake", max_concurrency=concurrency,
                     timeout_s=10, max_retries=8, default_params={"max_tokens": 64},
                     price_input_per_mtok=1.0, price_output_per_mtok=2.0)
    requests = [ChatRequest(model="fake", stage="bench", tag=str(i),
                            messages=(Message(role="user", content=f"写一篇短文，第{i}题"),))
                for i in range(calls)]
    with tempfile.TemporaryDirectory() as tmp, spawn_fake_server(scenario) as server:
        ledger_path = Path(tmp) / "ledger.duckdb"

        async def main() -> list[tuple[bool, float]]:
            with Ledger(ledger_path) as ledger:
                gateway = Gateway(Registry(models={"fake": spec}), ledger,
                                  base_urls={"fake": server.base_url},
                                  backoff=Backoff(base_s=0.2, cap_s=2.0), seed=0)
                results = await gateway.run(requests)
                await gateway.aclose()
                return [(r.ok, r.latency_s) for r in results]

        cpu0, t0 = _cpu(), time.perf_counter()
        outcomes = run_async(main())
        oks = [ok for ok, _ in outcomes]
        latencies = sorted(lat for _, lat in outcomes)
        wall, cpu = time.perf_counter() - t0, _cpu() - cpu0
        stats = server.stats()
        with duckdb.connect(str(ledger_path), read_only=True) as con:
            ledger_ok = con.execute("select count(distinct key) from llm_calls "
                                    "where status = 'ok'").fetchall()[0][0]
    twice = sum(v for k, v in stats.completed_per_key.items() if int(k) > 1)
    return {"wall_s": wall, "p50_ms": 1000 * latencies[len(latencies) // 2],
            "p95_ms": 1000 * latencies[int(len(latencies) * 0.95)],
            "cpu_ms_per_call": cpu / calls * 1000, "ok": sum(oks),
            "lost": calls - sum(oks), "ledger_ok": ledger_ok, "completed_twice": twice,
            "received": stats.totals.received, "faults": sum(stats.totals.faults.values())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    ideal = args.calls * args.latency_ms / 1000 / args.concurrency
    clean = run(args.calls, args.latency_ms, args.concurrency, faults=False)
    ratio = clean["wall_s"] / ideal
    print(f"clean: {args.calls} calls in {clean['wall_s']:.1f} s (ideal {ideal:.1f} s, "
          f"{ratio:.3f}x; target <= {TARGET_RATIO}x: "
          f"{'PASS' if ratio <= TARGET_RATIO else 'FAIL'}); client CPU "
          f"{clean['cpu_ms_per_call']:.2f} ms/call (target <= {TARGET_CPU_MS}: "
          f"{'PASS' if clean['cpu_ms_per_call'] <= TARGET_CPU_MS else 'FAIL'}); HTTP latency p50 "
          f"{clean['p50_ms']:.0f} ms, p95 {clean['p95_ms']:.0f} ms; ok {clean['ok']:.0f}, "
          f"ledger ok {clean['ledger_ok']:.0f}")
    faulty = run(args.calls, args.latency_ms, args.concurrency, faults=True)
    good = (faulty["lost"] == 0 and faulty["completed_twice"] == 0
            and faulty["ledger_ok"] == args.calls)
    print(f"10% faults: {faulty['faults']:.0f} faults injected over {faulty['received']:.0f} "
          f"requests; wall {faulty['wall_s']:.1f} s; lost {faulty['lost']:.0f}; completed twice "
          f"{faulty['completed_twice']:.0f}; ledger ok {faulty['ledger_ok']:.0f}/{args.calls}: "
          f"{'PASS' if good else 'FAIL'}")


if __name__ == "__main__":
    main()
