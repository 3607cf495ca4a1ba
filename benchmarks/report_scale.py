"""The report's essay browser at 1×, 10× and the paper's scale, in Chromium (issue 28 item 1).

Targets (issue 28): at the paper's scale (15 writers × 728 prompts, 2 judges, ~600-character
analyses) the page weighs ≤ 5 MB and is interactive within 2 s; a filter change takes well
under a second (``FILTER_TARGET_S``). Prints, per scale: the page's size and the sidecar
folder's (``report_files/``, chunk files), what the texts would add to the page embedded
instead (gzip + base64 per chunk, the alternative ``browser.py`` turned down), the time to
write the report, the time until the page is interactive (navigation to the essay browser
ready, median of ``--loads``), the time of a filter change, a sort, a permalink opening its
essay and a full-text search, DOM elements and JS heap.

The data. A real run on the fake server (``essaybench.llm.fake``) gives the shape: 63
prompts × 6 writers, 2 judges, through the real generate, judge, aggregate and stats stages
(378 essays, 756 judgments: the issue's 1× run, without pairwise). The fake server writes
judge analyses of 1–25 characters and essays of a few dozen, so the script puts texts of
real length in their place: essays of 700–900 characters and analyses of 600, made of
sentences drawn from an order-2 character Markov chain over the project's own Chinese text
(``data/``, ``rubrics/``), so they compress about as real Chinese does (the script prints
gzip's bytes per character). 10× (252 prompts × 15 writers = 3,780 essays) and the paper's
scale (728 × 15 = 10,920) copy the real run's rows to new prompts and writers (new ids,
new texts, the real run's scores and statuses), with stats tables computed from the copies
by the stats stage's own ``build_stats_tables``. Running the whole pipeline at the paper's
scale with two judges instead would take many minutes on this machine; the report reads
the same tables either way.

    python benchmarks/report_scale.py [--scales 1,10,paper] [--loads 3] [--keep]
"""

from __future__ import annotations

import argparse
import base64
import gzip
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.pipeline_scale import synthetic_prompt_set
from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.stats_tables import StatsParams, build_stats_tables
from essaybench.core.hashing import sha256_hex
from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import spawn_fake_server
from essaybench.llm.registry import ModelSpec, Registry
from essaybench.llm.session import open_gateway
from essaybench.report.browser import chunk_data
from essaybench.report.data import RunData, load_run
from essaybench.report.write import chunks_folder, write_page
from essaybench.stages.aggregate import aggregate_stage
from essaybench.stages.generate import generate_stage
from essaybench.stages.judge import judge_stage
from essaybench.stages.stats import stats_stage
from essaybench.store import Store

PAGE_TARGET_MB = 5.0
INTERACTIVE_TARGET_S = 2.0
FILTER_TARGET_S = 0.3  # "well under a second"
BASE_PROMPTS, BASE_WRITERS, JUDGES = 63, 6, ("judge-a", "judge-b")
SCALES = {"1": (63, 6), "10": (252, 15), "paper": (728, 15)}
ANALYSIS_CHARS = 600
STATS = StatsParams(n_boot=200, seed=0)
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


# ---- text of real length -------------------------------------------------------------

class Markov:
    """Order-2 character chain over the project's Chinese text: sentences that compress
    like real Chinese (a random character soup would not compress at all, a repeated one
    far too well)."""

    def __init__(self, seed: int = 0) -> None:
        corpus = []
        for folder in ("data", "rubrics"):
            for path in sorted((PROJECT_ROOT / folder).rglob("*")):
                if path.is_file() and path.suffix in (".jsonl", ".md", ".yaml", ".csv", ".txt"):
                    text = path.read_text(encoding="utf-8", errors="ignore")
                    corpus += re.findall(r"[\u4e00-\u9fff，。；：！？、“”]{6,}", text)
        self.corpus = corpus
        self.next: dict[str, list[str]] = {}
        for run in corpus:
            padded = "^^" + run
            for i in range(2, len(padded)):
                self.next.setdefault(padded[i - 2:i], []).append(padded[i])
        self.rng = random.Random(seed)
        self.sentences = [self._sentence() for _ in range(6000)]

    def _sentence(self) -> str:
        state, out = "^^", list[str]()
        while len(out) < 60:
            choices = self.next.get(state)
            if not choices:
                break
            c = self.rng.choice(choices)
            out.append(c)
            state = state[1] + c
            if c in "。！？" and len(out) > 8:
                break
        text = "".join(out)
        return text if text.endswith(("。", "！", "？")) else text + "。"

    def text(self, n_chars: int) -> str:
        parts, size = [], 0
        while size < n_chars:
            s = self.rng.choice(self.sentences)
            parts.append(s)
            size += len(s)
        return "".join(parts)[:n_chars]


# ---- the real run (the shape) ---------------------------------------------------------

def real_run(folder: Path) -> RunData:
    """63 prompts × 6 writers × 2 judges on the fake server, through the real stages."""
    store = Store(folder / "store")
    version = synthetic_prompt_set(store, BASE_PROMPTS)
    writers = [f"writer-{i:02d}" for i in range(BASE_WRITERS)]
    scenario = FakeScenario.model_validate({"models": {"*": {
        "reply": "template", "template": "{model}第{n}篇：{prompt}", "structured": "schema",
        "enforce_max_tokens": False}}})
    config = BenchmarkConfig.model_validate({
        "prompt_set": version, "generate": {"models": writers},
        "judge": {"judges": list(JUDGES)}})
    models = [*writers, *JUDGES]
    registry = Registry(models={m: ModelSpec(
        name=m, provider="fake", base_url="http://fake.invalid/v1", model_id=m, family="fake",
        structured_output="json_schema", max_concurrency=32, timeout_s=60) for m in models})
    with spawn_fake_server(scenario) as server, open_gateway(
            registry, store.root, models,
            base_urls=dict.fromkeys(models, server.base_url)) as session:
        gen = generate_stage(store, "scale", config, session)
        judged = judge_stage(store, "scale", config, gen, session)
    aggregate_stage(store, "scale", judged)
    stats_stage(store, "scale", STATS, judged, None, dict.fromkeys(writers, "fake"))
    return load_run(store, "scale")


def scaled(base: RunData, n_prompts: int, n_writers: int, markov: Markov) -> RunData:
    """``base``'s rows copied to ``n_prompts`` × ``n_writers`` (new ids and texts)."""
    rng = random.Random(n_prompts * 1000 + n_writers)
    prompts = sorted(set(base.essays["prompt_id"].to_list()))
    writers = sorted(set(base.essays["model"].to_list()))
    pairs = pl.DataFrame({"p": [p for p in range(n_prompts) for _ in range(n_writers)],
                          "w": [w for _ in range(n_prompts) for w in range(n_writers)]})
    pairs = pairs.with_columns(
        base_prompt=pl.col("p").map_elements(lambda p: prompts[p % len(prompts)],
                                             return_dtype=pl.String),
        base_model=pl.col("w").map_elements(lambda w: writers[w % len(writers)],
                                            return_dtype=pl.String),
        new_prompt=pl.col("p").map_elements(lambda p: sha256_hex(f"scale-{p}")[:16],
                                            return_dtype=pl.String),
        new_model=pl.col("w").map_elements(lambda w: f"writer-{w:02d}",
                                           return_dtype=pl.String))

    def copy(frame: pl.DataFrame) -> pl.DataFrame:
        out = pairs.join(frame, left_on=["base_prompt", "base_model"],
                         right_on=["prompt_id", "model"])
        return (out.drop("prompt_id", "model", strict=False)
                .rename({"new_prompt": "prompt_id", "new_model": "model"})
                .sort("p", "w"))

    essays = copy(base.essays)
    ok = essays["status"] == "ok"
    texts = [markov.text(rng.randint(700, 900)) if good else None for good in ok]
    essays = essays.with_columns(
        essay_text=pl.Series(texts, dtype=pl.String),
        prompt_text=pl.format("第{}题：", pl.col("p")) + pl.col("prompt_text"))
    judgments = copy(base.judgments)
    analyses = [markov.text(ANALYSIS_CHARS) if s == "ok" else a
                for s, a in zip(judgments["status"], judgments["analysis"], strict=True)]
    judgments = judgments.with_columns(analysis=pl.Series(analyses, dtype=pl.String))
    drop = ["p", "w", "base_prompt", "base_model"]
    essays = essays.drop(drop).select(base.essays.columns)
    judgments = judgments.drop(drop).select(base.judgments.columns)
    stats = build_stats_tables(judgments, essays, None, STATS,
                               dict.fromkeys(essays["model"].unique().to_list(), "fake"))
    return replace(base, essays=essays, judgments=judgments, stats=stats)


# ---- the browser -----------------------------------------------------------------------

@dataclass
class Figures:
    essays: int
    page_mb: float
    sidecar_mb: float
    chunks: int
    embedded_mb: float
    gzip_bytes_per_char: float
    write_s: float
    interactive_s: list[float]
    filter_s: float
    sort_s: float
    permalink_s: float
    search_s: float
    dom_elements: int
    heap_mb: float


# Runs in the page (page.evaluate is not subject to the page's CSP): change a control,
# wait two frames (layout and paint included), return the seconds it took.
CHANGE = """async ([selector, value]) => {
  const t0 = performance.now();
  const control = document.querySelector(selector);
  control.value = value;
  control.dispatchEvent(new Event('change'));
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return (performance.now() - t0) / 1000;
}"""


def measure(path: Path, loads: int) -> dict[str, Any]:
    from playwright.sync_api import expect, sync_playwright

    url = path.resolve().as_uri()
    out: dict[str, Any] = {"interactive": []}
    problems: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            for _ in range(loads):
                context = browser.new_context(offline=True,
                                              viewport={"width": 1280, "height": 900})
                page = context.new_page()
                page.on("console", lambda m: problems.append(m.text)
                        if m.type in ("error", "warning") else None)
                page.on("pageerror", lambda e: problems.append(str(e)))
                t0 = time.perf_counter()
                page.goto(url, wait_until="load")
                page.wait_for_selector("#essays[data-ready='yes']", state="attached")
                out["interactive"].append(time.perf_counter() - t0)
                context.close()
            context = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
            page = context.new_page()
            page.on("console", lambda m: problems.append(m.text)
                    if m.type in ("error", "warning") else None)
            page.goto(url, wait_until="load")
            page.wait_for_selector("#essays[data-ready='yes']", state="attached")
            model = page.locator("#filter-model option").nth(2).get_attribute("value")
            out["filter"] = max(page.evaluate(CHANGE, ["#filter-model", model]),
                                page.evaluate(CHANGE, ["#filter-status", "ok"]),
                                page.evaluate(CHANGE, ["#filter-model", ""]))
            page.evaluate(CHANGE, ["#filter-status", ""])
            out["sort"] = max(page.evaluate(CHANGE, ["#sort", "score-desc"]),
                              page.evaluate(CHANGE, ["#sort", "disagreement"]))
            page.evaluate(CHANGE, ["#sort", "prompt"])
            out["dom"] = page.evaluate("document.getElementsByTagName('*').length")
            last = page.evaluate("JSON.parse(document.getElementById('essay-index')"
                                 ".textContent).essays.slice(-1)[0][0]")
            t0 = time.perf_counter()
            page.goto(f"{url}#essay={last}")
            page.locator(f"details[data-id='{last}'] .essay-text").wait_for()
            out["permalink"] = time.perf_counter() - t0
            n = page.evaluate("JSON.parse(document.getElementById('essay-index')"
                              ".textContent).chunks.length")
            t0 = time.perf_counter()
            page.fill("#search", "第7题")
            page.press("#search", "Enter")
            expect(page.locator("#search-progress")).to_contain_text(
                f"{n} of {n} files read", timeout=120_000)
            out["search"] = time.perf_counter() - t0
            out["heap"] = page.evaluate("performance.memory.usedJSHeapSize") / 2**20
            context.close()
        finally:
            browser.close()
    if problems:
        print(f"  console: {problems[:5]}")
    return out


def gzip_per_char(text: str) -> float:
    """gzip's bytes per character of ``text``, compressed in blocks of a chunk's size."""
    step = 200_000
    blocks = [text[i:i + step].encode("utf-8") for i in range(0, len(text), step)]
    return sum(len(gzip.compress(b, 6)) for b in blocks) / max(len(text), 1)


def corpus_per_char(markov: Markov) -> float:
    """gzip's bytes per character of the real Chinese text the chain learnt from."""
    return gzip_per_char("".join(markov.corpus))


def sizes(page: Path) -> tuple[float, float, int, float, float]:
    """Page MB, sidecar MB, chunk files, MB the chunks would add to the page as gzip +
    base64, and gzip's bytes per character of the chunks' texts (essays and analyses)."""
    files = sorted(chunks_folder(page).iterdir())
    raw = [f.read_bytes() for f in files]
    embedded = sum(len(base64.b64encode(gzip.compress(b, 6))) for b in raw)
    texts = []
    for b in raw:
        for e in chunk_data(b)[1]["essays"]:
            texts += [e.get("text", "")] + [j.get("analysis", "") for j in e["judgments"]]
    return (page.stat().st_size / 1e6, sum(map(len, raw)) / 1e6, len(files),
            embedded / 1e6, gzip_per_char("".join(texts)))


def run_scale(name: str, data: RunData, folder: Path, loads: int) -> Figures:
    path = folder / name / "report.html"
    t0 = time.perf_counter()
    write_page(data, path)
    write_s = time.perf_counter() - t0
    page_mb, side_mb, n_chunks, embedded_mb, per_char = sizes(path)
    b = measure(path, loads)
    return Figures(data.essays.height, page_mb, side_mb, n_chunks, embedded_mb, per_char,
                   write_s, b["interactive"], b["filter"], b["sort"], b["permalink"],
                   b["search"], b["dom"], b["heap"])


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scales", default="1,10,paper")
    parser.add_argument("--loads", type=int, default=3, help="page loads timed per scale")
    parser.add_argument("--keep", action="store_true", help="keep the pages written")
    args = parser.parse_args()
    os.environ.setdefault("DO_NOT_TRACK", "1")
    tmp = Path(tempfile.mkdtemp(prefix="essaybench-report-scale-"))
    try:
        t0 = time.perf_counter()
        base = real_run(tmp / "run")
        markov = Markov()
        real_rate = corpus_per_char(markov)
        print(f"real run on the fake server: {base.essays.height} essays, "
              f"{base.judgments.height} judgments ({time.perf_counter() - t0:.1f} s); the "
              f"project's own Chinese text (the chain's corpus) compresses to "
              f"{real_rate:.2f} bytes per character with gzip")
        failed = False
        for scale in args.scales.split(","):
            n_prompts, n_writers = SCALES[scale]
            data = scaled(base, n_prompts, n_writers, markov)
            f = run_scale(scale, data, tmp / "pages", args.loads)
            interactive = statistics.median(f.interactive_s)
            label = "paper scale" if scale == "paper" else f"{scale}×"
            print(f"== {label}: {n_prompts} prompts × {n_writers} writers × {len(JUDGES)} "
                  f"judges = {f.essays} essays ({ANALYSIS_CHARS}-character analyses)")
            print(f"  page {f.page_mb:.2f} MB; sidecar report_files/ {f.sidecar_mb:.1f} MB in "
                  f"{f.chunks} chunks. Embedded in the page instead (gzip + base64 per "
                  f"chunk) they would add {f.embedded_mb:.1f} MB (the texts compress to "
                  f"{f.gzip_bytes_per_char:.2f} bytes per character, about as the corpus "
                  f"does; less repetitive prose compresses less)")
            print(f"  written in {f.write_s:.2f} s; interactive in {interactive:.2f} s "
                  f"(loads {', '.join(f'{s:.2f}' for s in f.interactive_s)}); filter change "
                  f"{f.filter_s * 1000:.0f} ms, sort {f.sort_s * 1000:.0f} ms; permalink "
                  f"opens its essay in {f.permalink_s:.2f} s; full-text search over every "
                  f"chunk {f.search_s:.1f} s; {f.dom_elements} DOM elements, JS heap "
                  f"{f.heap_mb:.0f} MB after the search")
            checks = [("page <= 5 MB", f.page_mb <= PAGE_TARGET_MB),
                      (f"filter and sort < {FILTER_TARGET_S * 1000:.0f} ms",
                       max(f.filter_s, f.sort_s) < FILTER_TARGET_S)]
            if scale == "paper":
                checks.append((f"interactive <= {INTERACTIVE_TARGET_S:.0f} s",
                               interactive <= INTERACTIVE_TARGET_S))
            print("  " + "; ".join(f"{what}: {verdict(ok)}" for what, ok in checks))
            failed |= not all(ok for _, ok in checks)
        print(f"overall: {verdict(not failed)}")
    finally:
        if args.keep:
            print(f"pages kept in {tmp / 'pages'}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
