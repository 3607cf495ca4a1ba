"""The arithmetic of one (model, stage)'s planned calls: tokens, USD and wall-time bounds.

Tokens come from the ledger's means where the caller has them, else from the text (the
caller counts them: :mod:`essaybench.bench.estimate_text`); USD at the registry's prices
(``ModelSpec.cost_usd``). Wall time two ways: a lower bound the run cannot beat (the
limiters' pacing, ``llm.ratelimit``, burst included, and the fastest latency the ledger
has seen; none without history, so 0) and an expected value (the ledger's median latency,
else LATENCY_OVERHEAD_S plus the reply at TOKENS_PER_S). Which calls a run makes, and their
sum over the run: :mod:`essaybench.bench.estimate`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from essaybench.bench.estimate_records import StageEstimate, TokenStats
from essaybench.llm.ratelimit import BURST_SECONDS
from essaybench.llm.registry import ModelSpec

LATENCY_OVERHEAD_S = 1.0  # assumed per call where the ledger has no latency
TOKENS_PER_S = 50.0  # assumed output speed where the ledger has no latency


@dataclass
class CallTally:
    """The planned calls of one (model, stage), summed."""

    spec: ModelSpec
    stats: TokenStats | None
    calls: int = 0
    input_tokens: float = 0.0
    output_tokens: float = 0.0
    charged: float = 0.0  # what the gateway's tpm bucket is charged
    cached_tokens: float = 0.0  # of input_tokens, a prompt cache could serve

    def add(self, n: int, input_chars: int, input_tokens: float, output_tokens: float,
            max_tokens: int | None, cached_tokens: float = 0.0) -> None:
        """``n`` calls of ``input_chars`` characters (``input_tokens`` tokens) expected to
        answer ``output_tokens``; the ledger's means replace both counts where it has any."""
        if self.stats is not None:
            input_tokens, output_tokens = (self.stats.mean_input_tokens,
                                           self.stats.mean_output_tokens)
        charge: float = input_chars + (max_tokens or 0)
        if self.spec.tpm is not None:  # TokenBucket.take charges at most its capacity
            charge = min(charge, _burst(self.spec.tpm))
        self.calls += n
        self.cached_tokens += min(cached_tokens, n * input_tokens)
        self.input_tokens += n * input_tokens
        self.output_tokens += n * output_tokens
        self.charged += n * charge

    def row(self, stage: str) -> StageEstimate:
        spec, stats = self.spec, self.stats
        if stats is not None and stats.median_latency_s is not None:
            latency, latency_from = stats.median_latency_s, "ledger"
        else:
            per_call = self.output_tokens / self.calls if self.calls else 0.0
            latency, latency_from = LATENCY_OVERHEAD_S + per_call / TOKENS_PER_S, "assumed"
        # The fastest call the ledger has seen; none: no floor (a call may take no time).
        fastest = 0.0 if stats is None or stats.min_latency_s is None else stats.min_latency_s
        rounds = math.ceil(self.calls / spec.max_concurrency)
        return StageEstimate(
            model=spec.name, stage=stage, calls=self.calls, input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cost_usd=_cost(spec, self.input_tokens, self.output_tokens), latency_s=latency,
            concurrency_s=rounds * latency, min_latency_s=fastest,
            floor_s=rounds * fastest,
            rpm_s=rate_bound(self.calls, spec.rpm), tpm_s=rate_bound(self.charged, spec.tpm),
            tokens_from="assumed" if stats is None else "ledger", latency_from=latency_from,
            cached_input_tokens=self.cached_tokens,
            cost_cached_usd=_cost(spec, self.input_tokens, self.output_tokens,
                                  self.cached_tokens),
            cost_batch_usd=(None if spec.batch_price_factor is None else _cost(
                spec, self.input_tokens, self.output_tokens, batch=True)))


def _burst(per_minute: int) -> float:
    return max(1.0, per_minute / 60.0 * BURST_SECONDS)  # ratelimit.TokenBucket's capacity


def rate_bound(amount: float, per_minute: int | None) -> float | None:
    """Seconds a per-minute limit needs for ``amount`` after the bucket's initial burst."""
    if per_minute is None:
        return None
    return max(0.0, amount - _burst(per_minute)) / (per_minute / 60.0)


def _cost(spec: ModelSpec, input_tokens: float, output_tokens: float, cached: float = 0.0,
          *, batch: bool = False) -> float | None:
    """At the registry's prices (``ModelSpec.cost_usd``): list, with ``cached`` input
    tokens at the cached-input price, or through the batch API."""
    if spec.is_embedded:
        return 0.0
    return spec.cost_usd(round(input_tokens), round(output_tokens),
                         round(cached) if cached else None, batch=batch)
