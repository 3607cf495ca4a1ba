"""How close ``essaybench estimate`` is, without ledger history, to what a run used (issue 26
item 5): per (model, stage) and in total, estimated ÷ actual calls, input and output tokens
and cost (target: within 1.5x either way), and the wall time's lower bound (target: never
above the actual) beside its expected value.

Each scenario curates the bundled sources into a fresh store, estimates the run from the
text alone (no ledger yet), then runs the generate and judge stages (judging while
generating, as the pipeline does) and reads what the ledger recorded:

- ``fake``: the fake server, two writers that do as their prompt says (an essay of the
  length it asks for, by a seeded factor the estimate does not know: a minimum 1.0-1.4x, a
  target or range within it ±10%, 500-1,000 characters when it asks for none; cut at
  max_tokens) and one judge answering the v3 judge prompt's schema (analysis ≤ 60
  characters, as the demo) whose provider reports its rubric as cached input (priced at a
  quarter); latency 20-80 ms. Cost is compared with the estimate's cached-input figure.
- ``embedded``: the demo's embedded SmolLM2 (one writer, one judge, a prompt or two of two
  genres); skipped when its runtime or GGUF is absent, or with ``--fake-only``.

    .venv/bin/python benchmarks/estimate_accuracy.py [--fake-only] [--per-genre 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from essaybench.bench.config import BenchmarkConfig, select_prompts
from essaybench.bench.estimate_check import CheckReport, compare
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.constraints.length import length_requirement
from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.scenario import FakeScenario, unit_hash
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.registry import ModelSpec, Registry, load_registry
from essaybench.llm.scope import ReuseScope
from essaybench.llm.session import open_gateway
from essaybench.runs.estimate import estimate_run, read_prompt_set
from essaybench.runs.estimate_check import read_run_calls
from essaybench.stages.generate import generate_stage
from essaybench.stages.judge import judge_stage
from essaybench.store import Store

TARGET = 1.5
STAGES = ("generate", "judge")
RUN = "r-accuracy"
# Chinese prose the fake writers cut their essays from (any CJK text counts the same).
PROSE = ("春天来了，田野里的麦苗绿油油的，远处的山坡上开满了桃花。我沿着小路慢慢地走，"
         "心里想着去年今日与祖父一同种树的情景。那时他说，树要十年才能成材，人要一生才能成器。")


def curated_store(root: Path) -> Store:
    from essaybench.curate.config import load_curate_config
    from essaybench.curate.funnel import CURATE_STAGES
    from essaybench.stages.curate import publish_prompt_set, run_curation_stage

    store = Store(root)
    config = load_curate_config(PROJECT_ROOT / "configs" / "curate.yaml")
    snap = None
    for stage in CURATE_STAGES:
        snap = run_curation_stage(store, "curate", stage, config, snap)
    assert snap is not None
    publish_prompt_set(store, "curate", snap)
    return store


def compliant_length(text: str, seed: str) -> int:
    """Characters a writer that does what ``text`` asks writes (seeded spread)."""
    u = unit_hash("length", seed, text)
    req = length_requirement(text)
    if req is None:
        return round(500 + 500 * u)
    if req.approx_chars is not None:
        return round(req.approx_chars * (0.9 + 0.2 * u))
    lo, hi = req.min_chars, req.max_chars
    if lo is not None and hi is not None:
        return round(lo + (hi - lo) * u)
    if lo is not None:
        return round(lo * (1.0 + 0.4 * u))
    return round((hi or 800) * (0.8 + 0.2 * u))


def fake_scenario(prompts: list[str], writers: list[str]) -> FakeScenario:
    models: dict[str, object] = {}
    for writer in writers:
        rules = [{"contains": [text], "reply": (PROSE * 40)[:compliant_length(text, writer)]}
                 for text in prompts]
        models[writer] = {"rules": rules, "latency_ms": {"mean": 50, "jitter": 30}}
    # The judge's provider caches prompts: each reply reports its system message (the
    # rubric) as cached input, as a warm cache would.
    models["judge"] = {"latency_ms": {"mean": 50, "jitter": 30}, "cache_report": "openai",
                       "cached_prefix": "system"}
    return FakeScenario.model_validate({"models": models})


def per_call(report: CheckReport) -> bool:
    """Tokens per call, estimated ÷ actual, per row; True when all are within TARGET."""
    ok = True
    for row in report.rows:
        est_calls, act_calls = row.estimated["calls"], row.actual["calls"]
        if not est_calls or not act_calls:
            continue
        parts = []
        for metric in ("input_tokens", "output_tokens"):
            est, act = row.estimated[metric], row.actual[metric]
            if est is None or not act:
                continue
            ratio = (est / est_calls) / (act / act_calls)
            ok = ok and 1 / TARGET <= ratio <= TARGET
            parts.append(f"{metric} per call {est / est_calls:.0f}/{act / act_calls:.0f} "
                         f"({ratio:.2f}x)")
        print(f"    {row.model:>14s} {row.stage:9s} " + ", ".join(parts))
    return ok


def run_and_check(store: Store, config: BenchmarkConfig, registry: Registry,
                  base_urls: dict[str, str] | None, *, totals: bool = True) -> bool:
    """``totals``: the target holds for the run's totals; else per call, with the calls
    an upper bound (the demo's tiny writer runs past max_tokens on some essays, which are
    not judged: the estimate counts every essay as judged)."""
    estimate = estimate_run(store.root, config, registry, stages=STAGES)
    models = list(config.models())
    started = time.monotonic()
    with open_gateway(registry, store.root, models, base_urls=base_urls,
                      scope=ReuseScope.of_run(RUN)) as session:
        gen = generate_stage(store, RUN, config, session, prefetch_judge=True)
        judge_stage(store, RUN, config, gen, session)
    wall = time.monotonic() - started
    actual, _ = read_run_calls(store.root, RUN)
    report = compare(estimate, actual, wall)
    for line in report.lines():
        print("   ", line)
    calls_bound = all((row.estimated["calls"] or 0) >= (row.actual["calls"] or 0)
                      for row in report.rows)
    lower = getattr(estimate, "lower_s", estimate.wall_s)
    ok = (report.within(TARGET) if totals else per_call(report) and calls_bound) and (
        lower <= wall)
    if totals:
        per_call(report)
    print(f"    wall: lower bound {lower:.1f} s <= actual {wall:.1f} s: "
          f"{'yes' if lower <= wall else 'NO'}; expected {estimate.wall_s:.1f} s")
    return ok


def fake(per_genre: int) -> bool:
    writers = ["writer-a", "writer-b"]
    with tempfile.TemporaryDirectory(prefix="estimate-accuracy-") as tmp:
        store = curated_store(Path(tmp) / "store")
        config = BenchmarkConfig(
            per_genre=per_genre, generate=GenerateParams(models=tuple(writers)),
            judge=JudgeParams(judges=["judge"], judge_prompt="judge_prompt.v3.yaml",
                              analysis_max_chars=60, max_tokens=1200), drift=None)
        _, prompts = read_prompt_set(store.root, "latest")
        texts = select_prompts(prompts, per_genre, config.sample_seed)["text"].to_list()
        names = [*writers, "judge"]
        registry = Registry(models={name: ModelSpec(
            name=name, provider="fake", base_url="http://fake.invalid/v1", model_id=name,
            family="fake", structured_output="json_schema", max_concurrency=8,
            price_input_per_mtok=1.0, price_output_per_mtok=2.0, timeout_s=10,
            price_cached_input_per_mtok=0.25 if name == "judge" else None,
            default_params={"max_tokens": 1024}) for name in names})
        with run_fake_server(fake_scenario(texts, writers)) as server:
            print(f"fake server: {len(texts)} prompts × {len(writers)} writers, one judge")
            return run_and_check(store, config, registry,
                                 dict.fromkeys(names, server.base_url))


def embedded(per_genre: int) -> bool | None:
    from essaybench.llm.embedded import EmbeddedServerError, locate_gguf, require_runtime

    try:
        require_runtime()
        locate_gguf()
    except (EmbeddedServerError, Exception) as exc:  # no runtime or GGUF: not measured
        print(f"embedded: skipped ({exc})")
        return None
    registry = load_registry(PROJECT_ROOT / "configs" / "models.yaml")
    with tempfile.TemporaryDirectory(prefix="estimate-accuracy-") as tmp:
        store = curated_store(Path(tmp) / "store")
        config = BenchmarkConfig(
            per_genre=per_genre, genres=("argumentative", "narrative"),
            generate=GenerateParams(models=("smollm2-135m-para-zh",)),
            judge=JudgeParams(judges=["smollm2-135m"], judge_prompt="judge_prompt.v3.yaml",
                              analysis_max_chars=60, max_tokens=1200), drift=None)
        print(f"embedded SmolLM2: {per_genre} prompts per genre × 1 writer, one judge")
        return run_and_check(store, config, registry, None, totals=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fake-only", action="store_true")
    parser.add_argument("--per-genre", type=int, default=3)
    parser.add_argument("--embedded-per-genre", type=int, default=1)
    args = parser.parse_args()
    results: dict[str, bool | None] = {"fake": fake(args.per_genre)}
    if not args.fake_only:
        results["embedded"] = embedded(args.embedded_per_genre)
    for name, ok in results.items():
        verdict = "SKIPPED" if ok is None else "PASS" if ok else "FAIL"
        what = (f"calls, tokens and cost within {TARGET}x" if name == "fake" else
                f"tokens per call within {TARGET}x, calls at most the estimate")
        print(f"{verdict}: {name}: {what}; wall-time lower bound at or below the actual")
    sys.exit(0 if all(ok is not False for ok in results.values()) else 1)


if __name__ == "__main__":
    main()
