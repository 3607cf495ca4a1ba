"""The arithmetic of one (model, stage)'s planned calls: tokens, USD and wall-time bounds.

Tokens come from the ledger's means where the caller has them, else from the text
(TOKENS_PER_CHAR per character); USD at the registry's list prices; the wall-time bounds
mirror the gateway's limiters (``llm.ratelimit``), burst included. Which calls a run
makes, and their sum over the run: :mod:`essaybench.bench.estimate`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from essaybench.bench.estimate_records import StageEstimate, TokenStats
from essaybench.constraints.length import length_requirement
from essaybench.llm.ratelimit import BURST_SECONDS
from essaybench.llm.registry import ModelSpec

TOKENS_PER_CHAR = 1.6  # Chinese, measured (DESIGN.md): an overestimate for ASCII text
MIN_LENGTH_MARGIN = 1.2  # "不少于800字": assume essays run 20% past a minimum
DEFAULT_ESSAY_CHARS = 800  # neither a requested length nor max_tokens
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

    def add(self, n: int, input_chars: int, output_tokens: float, max_tokens: int | None) -> None:
        """``n`` calls of ``input_chars`` characters expected to answer ``output_tokens``."""
        if self.stats is not None:
            input_tokens, output_tokens = (self.stats.mean_input_tokens,
                                           self.stats.mean_output_tokens)
        else:
            input_tokens = input_chars * TOKENS_PER_CHAR
        charge: float = input_chars + (max_tokens or 0)
        if self.spec.tpm is not None:  # TokenBucket.take charges at most its capacity
            charge = min(charge, _burst(self.spec.tpm))
        self.calls += n
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
        return StageEstimate(
            model=spec.name, stage=stage, calls=self.calls, input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cost_usd=_cost(spec, self.input_tokens, self.output_tokens), latency_s=latency,
            concurrency_s=math.ceil(self.calls / spec.max_concurrency) * latency,
            rpm_s=rate_bound(self.calls, spec.rpm), tpm_s=rate_bound(self.charged, spec.tpm),
            tokens_from="assumed" if stats is None else "ledger", latency_from=latency_from)


def _burst(per_minute: int) -> float:
    return max(1.0, per_minute / 60.0 * BURST_SECONDS)  # ratelimit.TokenBucket's capacity


def rate_bound(amount: float, per_minute: int | None) -> float | None:
    """Seconds a per-minute limit needs for ``amount`` after the bucket's initial burst."""
    if per_minute is None:
        return None
    return max(0.0, amount - _burst(per_minute)) / (per_minute / 60.0)


def _cost(spec: ModelSpec, input_tokens: float, output_tokens: float) -> float | None:
    if spec.is_embedded:
        return 0.0
    pin, pout = spec.price_input_per_mtok, spec.price_output_per_mtok
    if pin is None or pout is None:
        return None
    return (input_tokens * pin + output_tokens * pout) / 1_000_000


def requested_chars(prompt_text: str) -> float | None:
    """The essay length a prompt asks for: a target as is, a range's midpoint, a minimum
    plus MIN_LENGTH_MARGIN, a maximum as is; None when it asks for none."""
    requirement = length_requirement(prompt_text)
    if requirement is None:
        return None
    if requirement.approx_chars is not None:
        return float(requirement.approx_chars)
    lo, hi = requirement.min_chars, requirement.max_chars
    if lo is not None and hi is not None:
        return (lo + hi) / 2
    if lo is not None:
        return lo * MIN_LENGTH_MARGIN
    return None if hi is None else float(hi)
