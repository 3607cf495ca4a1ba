"""The embedded model's speed: server start-up, generation, prompt reading and judge calls.

    python benchmarks/embedded_model.py --repeats 3

One server (xllamacpp, one thread), as the demo runs each replica. Rates are given per
second of wall time and per CPU-second of the server process: on a shared machine the
wall figures follow the load, the CPU figures much less. The judge calls are the demo's
(judge prompt v3, its analysis length, anchor essays): the first of a genre reads its
rubric; a later one, after a call of the other genre, finds the rubric in the server's
prompt cache and reads only its essay. PASS/FAIL compares the CPU figures with targets
from the llama-cpp-python build this replaced (~56 tokens/s on one thread, DESIGN.md).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import psutil  # type: ignore[import-untyped]

from essaybench.bench.anchors import AnchorEssay, load_anchor_set
from essaybench.bench.judge.request import JudgeParams, load_scoring, make_renderer
from essaybench.llm.embedded import EmbeddedServer

STORY = "Write a long story about a lighthouse keeper."
LONG_PROMPT = "请阅读并概括下面的文字。" + "春天来了，校园里的花都开了，同学们在操场上奔跑。" * 60
DEMO_JUDGE = JudgeParams(judges=["smollm2-135m"], judge_prompt="judge_prompt.v3.yaml",
                         analysis_max_chars=60, max_tokens=1200, temperature=0.2)
# Targets, per CPU-second of the server: the old build's generation rate less a margin
# (the wheel is built for AVX2, not for this CPU), and a judge call that finds its rubric
# cached in a small fraction of the ~40 s a rubric costs to read.
MIN_GEN_PER_CPU_S = 30.0
MAX_WARM_JUDGE_CPU_S = 15.0


@dataclass
class Call:
    wall_s: float
    cpu_s: float  # the server process's user + system time during the call
    usage: dict[str, Any]


def _cpu_s(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def _post(server: EmbeddedServer, proc: psutil.Process, body: dict[str, Any]) -> Call:
    cpu0, t0 = _cpu_s(proc), time.perf_counter()
    reply = httpx.post(f"{server.base_url}/chat/completions", timeout=900, trust_env=False,
                       json={"model": "embedded", "seed": 1, **body})
    reply.raise_for_status()
    return Call(time.perf_counter() - t0, _cpu_s(proc) - cpu0, reply.json()["usage"])


def _chat(server: EmbeddedServer, proc: psutil.Process, text: str, max_tokens: int) -> Call:
    return _post(server, proc, {"messages": [{"role": "user", "content": text}],
                                "max_tokens": max_tokens, "temperature": 0})


def _judge(server: EmbeddedServer, proc: psutil.Process, essay: AnchorEssay) -> Call:
    renderer = make_renderer(DEMO_JUDGE, load_scoring(DEMO_JUDGE))
    messages, schema = renderer.call(essay.genre, essay.prompt, essay.essay)
    return _post(server, proc, {"messages": messages, "temperature": DEMO_JUDGE.temperature,
                                "max_tokens": DEMO_JUDGE.max_tokens,
                                "response_format": {"type": "json_object", "schema": schema}})


def _two_genres(essays: tuple[AnchorEssay, ...]) -> tuple[AnchorEssay, AnchorEssay, AnchorEssay]:
    """Two essays of one genre and one of another: (a, other, a2)."""
    first = essays[0]
    same = next(e for e in essays[1:] if e.genre == first.genre)
    other = next(e for e in essays if e.genre != first.genre)
    return first, other, same


def _median(values: list[float], fmt: str) -> str:
    return format(statistics.median(values), fmt)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        rows.setdefault(name, []).append(value)

    cold, other, warm = _two_genres(load_anchor_set().essays)
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp, EmbeddedServer(tmp) as server:
            assert server.startup_s is not None and server.process is not None
            proc = psutil.Process(server.process.pid)
            add("start-up s", server.startup_s)
            short, long = _chat(server, proc, STORY, 1), _chat(server, proc, STORY, 128)
            n = long.usage["completion_tokens"] - 1
            add("generation tok/s", n / max(long.wall_s - short.wall_s, 1e-9))
            add("generation tok/CPU-s", n / max(long.cpu_s - short.cpu_s, 1e-9))
            read = _chat(server, proc, LONG_PROMPT, 1)
            add("prompt reading tok/s", read.usage["prompt_tokens"] / read.wall_s)
            add("prompt reading tok/CPU-s", read.usage["prompt_tokens"] / read.cpu_s)
            calls: dict[str, Call] = {}
            for name, essay in (("cold", cold), ("other", other), ("warm", warm)):
                calls[name] = _judge(server, proc, essay)
            for name in ("cold", "warm"):
                call = calls[name]
                add(f"judge {name} s", call.wall_s)
                add(f"judge {name} CPU-s", call.cpu_s)
                add(f"judge {name} prompt tok", call.usage["prompt_tokens"])
                add(f"judge {name} cached tok",
                    call.usage.get("prompt_tokens_details", {}).get("cached_tokens", 0))
                add(f"judge {name} reply tok", call.usage["completion_tokens"])
    print(f"embedded SmolLM2-135M via xllamacpp (1 thread), medians of {args.repeats}:")
    for name, values in rows.items():
        print(f"  {name:28s} {_median(values, '.1f')}")
    checks: list[tuple[str, Callable[[float], bool], str]] = [
        ("generation tok/CPU-s", lambda v: v >= MIN_GEN_PER_CPU_S, f">= {MIN_GEN_PER_CPU_S:g}"),
        ("judge warm CPU-s", lambda v: v <= MAX_WARM_JUDGE_CPU_S, f"<= {MAX_WARM_JUDGE_CPU_S:g}"),
    ]
    for name, ok, target in checks:
        value = statistics.median(rows[name])
        print(f"{'PASS' if ok(value) else 'FAIL'}: {name} {value:.1f} (target {target})")


if __name__ == "__main__":
    main()
