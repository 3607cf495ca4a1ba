"""The embedded model's speed: server start-up, generation and prompt-reading rates.

    python benchmarks/embedded_model.py --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import httpx

from essaybench.llm.embedded import EmbeddedServer

STORY = "Write a long story about a lighthouse keeper."
LONG_PROMPT = "请阅读并概括下面的文字。" + "春天来了，校园里的花都开了，同学们在操场上奔跑。" * 60


def _chat(base_url: str, text: str, max_tokens: int) -> tuple[float, dict[str, int]]:
    t0 = time.perf_counter()
    r = httpx.post(f"{base_url}/chat/completions", timeout=600, json={
        "model": "x", "messages": [{"role": "user", "content": text}],
        "max_tokens": max_tokens, "temperature": 0, "seed": 1})
    r.raise_for_status()
    return time.perf_counter() - t0, r.json()["usage"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    starts, gen_rates, read_rates = [], [], []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp, EmbeddedServer(tmp) as server:
            assert server.startup_s is not None
            starts.append(server.startup_s)
            short_s, _ = _chat(server.base_url, STORY, 1)
            long_s, usage = _chat(server.base_url, STORY, 128)
            gen_rates.append((usage["completion_tokens"] - 1) / max(long_s - short_s, 1e-9))
            read_s, usage = _chat(server.base_url, LONG_PROMPT, 1)
            read_rates.append(usage["prompt_tokens"] / read_s)
    print(f"embedded SmolLM2-135M (1 thread), medians of {args.repeats}: start-up "
          f"{statistics.median(starts):.1f} s; generation {statistics.median(gen_rates):.0f} "
          f"tokens/s; prompt reading {statistics.median(read_rates):.0f} tokens/s")


if __name__ == "__main__":
    main()
