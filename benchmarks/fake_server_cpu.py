"""CPU the fake OpenAI-compatible server spends per chat request (its own process only).

Spawns the fake server as a subprocess with the pipeline benchmark's scenario (template
replies for plain requests, schema-generated JSON for structured ones; no latency) and
sends, at a concurrency of 64, an even mix of short essay-generation requests and
judge-like requests (a ~3 KB Chinese user message and a JSON schema of 25 integer scores
1..10 plus an "analysis" string, ``strict`` json_schema response format). Every request
body is distinct, as in the pipeline. The server's user + system CPU time over each run
comes from the ``cpu_s`` of its ``/_fake/stats``; the client's CPU is not counted.

Two send rates: as fast as possible (the server is saturated and handles requests in
batches, the cheapest case per request) and 250 requests/s (requests arrive one at a
time, as in benchmarks/pipeline_scale.py, whose client is the bottleneck: the figure to
compare with that benchmark). Prints the CPU ms per request of each run and the median
per rate. Other load on the machine moves the figures: compare runs made close together::

    python benchmarks/fake_server_cpu.py [--requests 2000] [--runs 3] [--rates 0 250]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

import aiohttp

from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, spawn_fake_server

SCENARIO = {"models": {"*": {"latency_ms": 0, "reply": "template",
                             "template": "{model}第{n}篇：{prompt}", "structured": "schema",
                             "enforce_max_tokens": False}}}
_TRAITS = [f"trait_{i:02d}" for i in range(25)]
JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "properties": {"analysis": {"type": "string", "minLength": 1},
                   **{t: {"type": "integer", "minimum": 1, "maximum": 10} for t in _TRAITS}},
    "required": ["analysis", *_TRAITS],
}
# ~1,000 CJK characters (~3 KB of UTF-8) of essay text for the judge to read.
_ESSAY = ("秋天的早晨，薄雾笼罩着小城。我沿着河边慢慢走，看见落叶随水漂远，"
          "想起外婆说过的话：日子像河水，流走了就不回头，可它留下的声音会一直在心里。") * 14


def generation(run: int, i: int) -> dict[str, Any]:
    return {"model": "writer", "max_tokens": 2048, "temperature": 0.7,
            "messages": [{"role": "user", "content": f"以“秋天”为题写一篇作文（{run}-{i}）。"}]}


def judge(run: int, i: int) -> dict[str, Any]:
    prompt = f"请为下面的作文评分（{run}-{i}）：\n{_ESSAY}"
    return {"model": "judge", "temperature": 0, "max_tokens": 1024,
            "messages": [{"role": "system", "content": "你是一位严格的高考作文阅卷老师。"},
                         {"role": "user", "content": prompt}],
            "response_format": {"type": "json_schema", "json_schema": {
                "name": "x", "schema": JUDGE_SCHEMA, "strict": True}}}


async def send_all(base_url: str, bodies: list[bytes], concurrency: int, rate: float) -> None:
    # aiohttp rather than httpx: the client shares the machine's 2 cores with the server, and
    # the less CPU it takes, the less the server's own figures depend on the client.
    queue = iter(enumerate(bodies))
    loop = asyncio.get_running_loop()
    start = loop.time()
    url = f"{base_url}/chat/completions"
    headers = {"content-type": "application/json"}
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:

        async def worker() -> None:
            for i, body in queue:  # one shared iterator: each body is sent once
                if rate > 0:
                    await asyncio.sleep(start + i / rate - loop.time())
                async with session.post(url, data=body, headers=headers) as response:
                    response.raise_for_status()
                    await response.read()

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def run(server: FakeServerHandle, run_id: int, requests: int, concurrency: int,
        rate: float) -> tuple[float, float]:
    """(server CPU ms per request, wall seconds) for one run of ``requests`` requests."""
    # Encoded as the project's client encodes them (UTF-8, no spaces), before the clock starts.
    bodies = [json.dumps((generation if i % 2 == 0 else judge)(run_id, i), ensure_ascii=False,
                         separators=(",", ":")).encode() for i in range(requests)]
    cpu0 = server.stats().totals.cpu_s
    t0 = time.perf_counter()
    asyncio.run(send_all(server.base_url, bodies, concurrency, rate))
    wall = time.perf_counter() - t0
    cpu = server.stats().totals.cpu_s - cpu0
    return 1000 * cpu / requests, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="Per run, half of each kind.")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rates", type=float, nargs="+", default=[0, 250],
                        help="Requests per second to send at; 0: as fast as possible.")
    args = parser.parse_args()
    run_ids = iter(range(10**6))
    with spawn_fake_server(FakeScenario.model_validate(SCENARIO)) as server:
        run(server, next(run_ids), 200, args.concurrency, 0)  # warm-up: first-use imports
        for rate in args.rates:
            label = f"{rate:g} requests/s" if rate > 0 else "as fast as possible"
            per_request = []
            for i in range(args.runs):
                ms, wall = run(server, next(run_ids), args.requests, args.concurrency, rate)
                per_request.append(ms)
                print(f"{label}, run {i + 1}: {args.requests} requests in {wall:.1f} s; "
                      f"server CPU {ms:.3f} ms/request")
            print(f"{label}: median server CPU {statistics.median(per_request):.3f} ms/request")


if __name__ == "__main__":
    main()
