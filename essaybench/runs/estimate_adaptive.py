"""The estimate of an adaptive run (``sampling: mode: adaptive``; issue 26 items 3 and 5):
its maximum, its minimum, and an expected figure when the store can say one.

An adaptive run asks for a prefix of its seeded prompt order
(:func:`~essaybench.bench.adaptive_order.adaptive_order`), so each figure is the ordinary
estimate (:func:`~essaybench.bench.estimate.estimate_benchmark`) of a prefix:

* **maximum**: the prefix the run cannot pass — ``max_prompts``, and the prompts whose
  planned calls fit in ``max_calls`` (the whole selection when neither is set);
* **minimum**: the prefix that first meets the floor per stratum (no run stops before);
* **expected**: the share of its selection the newest adaptive run in the store sampled,
  applied to this selection, rounded up to a round and kept between the two. Where it
  depends on how far apart the models are this week, it is a guess from last week; with no
  adaptive run in the store there is no basis for one, and the estimate says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from essaybench.bench.adaptive_order import adaptive_order
from essaybench.bench.adaptive_scores import adaptive_prefix, max_prompts_of, strata_of
from essaybench.bench.budget import format_usd
from essaybench.bench.config import BenchmarkConfig, select_prompts
from essaybench.bench.estimate import ESTIMATED_STAGES, estimate_benchmark
from essaybench.bench.estimate_records import Estimate
from essaybench.llm.registry import Registry
from essaybench.runs.estimate import read_prompt_set, read_token_stats
from essaybench.store import Store

ADAPTIVE_STAGE = "adaptive"


@dataclass(frozen=True)
class AdaptiveEstimate:
    """The figures of an adaptive run beside the full selection's."""

    of: int  # prompts selected
    max_prompts: int
    maximum: Estimate
    min_prompts: int
    minimum: Estimate
    expected_prompts: int | None
    expected: Estimate | None
    expected_from: str  # how the expected figure was derived, or why there is none


def newest_share(store_root: Path | str) -> tuple[float, str] | None:
    """(sampled / selected, which run) of the newest adaptive run in the store, if any."""
    root = Path(store_root)
    if not (root / "catalog.duckdb").is_file():
        return None
    for run in Store(root).stage_runs(None, 100_000):  # newest first
        summary = (run.meta or {}).get("adaptive") if run.stage == ADAPTIVE_STAGE else None
        if run.status == "ok" and isinstance(summary, dict) and summary.get("of"):
            return int(summary["sampled"]) / int(summary["of"]), run.run_id
    return None


def estimate_adaptive(store_root: Path | str, config: BenchmarkConfig, registry: Registry, *,
                      stages: Sequence[str] = ESTIMATED_STAGES, history: bool = True,
                      exclude_run: str = "") -> AdaptiveEstimate | None:
    """The adaptive figures of a run of ``config`` (None: it samples every prompt)."""
    params = config.sampling
    if params.mode != "adaptive":
        return None
    version, prompts = read_prompt_set(store_root, config.prompt_set)
    selected = select_prompts(prompts, config.per_genre, config.sample_seed, config.genres)
    order = adaptive_order(strata_of(selected), params)
    stats, _ = (read_token_stats(store_root, exclude_run=exclude_run) if history
                else ({}, None))

    def at(n: int) -> Estimate:
        return estimate_benchmark(adaptive_prefix(selected, config, n), config, registry,
                                  stats, prompt_set=version, stages=stages)

    top = max_prompts_of(order, config)
    low = min(order.prompts_after(order.floor_round(params.floor_per_stratum)), top)
    share = newest_share(store_root)
    if share is None:
        expected_n, why = None, (
            "no expected figure: no adaptive run in this store yet (how many prompts a run "
            "needs depends on how far apart the models are); it lies between the minimum "
            "and the maximum")
    else:
        rounds = math.ceil(share[0] * len(order.prompt_ids) / order.round_size)
        expected_n = max(low, min(top, order.prompts_after(rounds)))
        why = (f"expected: the share of its prompts the newest adaptive run ({share[1]}) "
               f"sampled, {share[0]:.0%}, rounded up to a round of {order.round_size}")
    return AdaptiveEstimate(
        of=len(order.prompt_ids), max_prompts=top, maximum=at(top), min_prompts=low,
        minimum=at(low), expected_prompts=expected_n,
        expected=at(expected_n) if expected_n is not None else None, expected_from=why)


def adaptive_lines(full: Estimate, adaptive: AdaptiveEstimate) -> list[str]:
    """The adaptive figures beside the full selection's, as printable lines."""

    def figure(label: str, n: int, e: Estimate) -> str:
        return (f"  {label}: {n} of {adaptive.of} prompts, {e.calls:,} calls, "
                f"{format_usd(e.cost_usd)}")

    lines = ["Adaptive sampling (sampling: mode: adaptive): the run stops once every "
             "question is decided, so it costs between the minimum and the maximum:",
             figure("full (every selected prompt)", full.n_prompts, full),
             figure("maximum (max_prompts, max_calls)", adaptive.max_prompts,
                    adaptive.maximum),
             figure("minimum (the floor per stratum)", adaptive.min_prompts,
                    adaptive.minimum)]
    if adaptive.expected is not None and adaptive.expected_prompts is not None:
        lines.append(figure("expected", adaptive.expected_prompts, adaptive.expected))
    lines.append(f"  {adaptive.expected_from}")
    return lines
