"""Cached input and batch prices in the estimate (issue 26 item 5): a judge prompt whose
rubric is the same for every essay of a genre is served from the provider's prompt cache
from the second call of each genre on, priced at the registry's cached-input price; a
batch price factor gives the batch figure. The list-price cost stays the upper bound."""

from __future__ import annotations

import polars as pl
import pytest

from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.estimate import estimate_benchmark
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams, load_scoring, make_renderer
from essaybench.llm.registry import ModelSpec, Registry

PROMPTS = pl.DataFrame({"prompt_id": ["p0", "p1", "p2"],
                        "genre": ["argumentative", "narrative", "narrative"],
                        "prompt_set": ["constrained", "open", "open"],
                        "text": ["写一篇不少于500字的议论文，谈谈诚信。",
                                 "以“门”为题写一篇记叙文。", "以“桥”为题写一篇记叙文。"]})
JUDGE = JudgeParams(judges=["j"], judge_prompt="judge_prompt.v3.yaml", analysis_max_chars=60,
                    max_tokens=1200)
CONFIG = BenchmarkConfig(generate=GenerateParams(models=("w",), samples=2), judge=JUDGE,
                         drift=None)


def _spec(name: str, **fields: object) -> ModelSpec:
    return ModelSpec.model_validate({
        "name": name, "provider": "t", "base_url": "http://x.invalid/v1", "model_id": name,
        "family": "fake", "price_input_per_mtok": 1.0, "price_output_per_mtok": 4.0,
        **fields})


def _cjk_tokens(text: str) -> float:
    cjk = sum(1 for c in text if "\u4e00" <= c <= "\u9fff" or "\u3000" <= c <= "\u303f"
              or "\uff00" <= c <= "\uffef")
    return cjk / 1.6 + (len(text) - cjk) / 4


def test_the_rubric_is_cached_from_the_second_call_of_a_genre() -> None:
    registry = Registry(models={s.name: s for s in (
        _spec("w"), _spec("j", price_cached_input_per_mtok=0.1, batch_price_factor=0.5))})
    est = estimate_benchmark(PROMPTS, CONFIG, registry, {}, prompt_set="ps-x")
    judge = next(r for r in est.rows if r.stage == "judge")
    renderer = make_renderer(JUDGE, load_scoring(JUDGE))
    system = {g: renderer.messages(g, "x", "y")[0]["content"]
              for g in ("argumentative", "narrative")}
    # argumentative: 1 prompt × 2 samples, the first uncached; narrative: 2 × 2, one first.
    repeats = {"argumentative": 1, "narrative": 3}
    low = sum(n * _cjk_tokens(system[g]) for g, n in repeats.items())
    assert judge.calls == 6
    assert low <= judge.cached_input_tokens <= low + 4 * 10  # + framing, a few user chars
    listed = (judge.input_tokens * 1.0 + judge.output_tokens * 4.0) / 1e6
    assert judge.cost_usd == pytest.approx(listed, rel=1e-3)
    assert judge.cost_cached_usd == pytest.approx(
        ((judge.input_tokens - judge.cached_input_tokens) * 1.0
         + judge.cached_input_tokens * 0.1 + judge.output_tokens * 4.0) / 1e6, rel=1e-3)
    assert judge.cost_batch_usd == pytest.approx(listed / 2, rel=1e-3)
    writer = next(r for r in est.rows if r.stage == "generate")
    assert writer.cached_input_tokens == 0 and writer.cost_batch_usd is None
    notes = " ".join(est.assumptions)
    assert "prompt cache" in notes and "batch API" in notes
    assert est.cost_cached_usd is not None and est.cost_usd is not None
    assert est.cost_cached_usd < est.cost_usd  # the list price stays the upper bound


def test_without_cache_or_batch_prices_nothing_is_discounted() -> None:
    registry = Registry(models={s.name: s for s in (_spec("w"), _spec("j"))})
    est = estimate_benchmark(PROMPTS, CONFIG, registry, {}, prompt_set="ps-x")
    judge = next(r for r in est.rows if r.stage == "judge")
    assert judge.cost_cached_usd == pytest.approx(judge.cost_usd)  # billed at input price
    notes = " ".join(est.assumptions)
    assert "prompt cache" not in notes and "batch API" not in notes
