"""What an estimate says: per (model, stage) rows, the run's totals, and its inputs'
token statistics (how they are computed: :mod:`essaybench.bench.estimate`)."""

from __future__ import annotations

from dataclasses import dataclass

from essaybench.core.errors import UserError


class EstimateError(UserError, ValueError):
    """The config cannot be estimated (a model missing from the registry, a bad design)."""


@dataclass(frozen=True)
class TokenStats:
    """Recent ok calls of one model in one stage, from the ledger."""

    calls: int
    mean_input_tokens: float
    mean_output_tokens: float
    median_latency_s: float | None
    min_latency_s: float | None = None  # the fastest of those calls


@dataclass(frozen=True)
class StageEstimate:
    """One (model, stage): its calls, tokens, cost and wall-time bounds (seconds)."""

    model: str
    stage: str
    calls: int
    input_tokens: float
    output_tokens: float
    cost_usd: float | None  # None: the registry has no price for the model
    latency_s: float  # typical latency of one call
    concurrency_s: float  # ceil(calls / max_concurrency) × latency
    rpm_s: float | None  # None: no rpm limit
    tpm_s: float | None  # None: no tpm limit
    tokens_from: str  # "ledger" or "assumed"
    latency_from: str  # "ledger" or "assumed"
    min_latency_s: float = 0.0  # the fastest a call has been (0: no history, no floor)
    floor_s: float = 0.0  # ceil(calls / max_concurrency) × min_latency_s
    cached_input_tokens: float = 0.0  # of input_tokens, a prompt cache could serve
    cost_cached_usd: float | None = None  # with those at the cached-input price
    cost_batch_usd: float | None = None  # through the batch API (None: no batch price)

    def bounds(self) -> dict[str, float]:
        """The expected wall time's parts: calls at the typical latency, the rate limits."""
        found = {"concurrency": self.concurrency_s, "rpm": self.rpm_s, "tpm": self.tpm_s}
        return {name: value for name, value in found.items() if value is not None}

    @property
    def wall_s(self) -> float:
        """Expected wall time: the largest of the bounds at the typical latency."""
        return max(self.bounds().values())

    @property
    def lower_s(self) -> float:
        """A lower bound: the rate limits' pacing and calls at the fastest latency seen."""
        return max(self.floor_s, self.rpm_s or 0.0, self.tpm_s or 0.0)

    @property
    def binding(self) -> str:
        """The bound that sets the wall time: concurrency, rpm or tpm."""
        bounds = self.bounds()
        return max(bounds, key=lambda name: bounds[name])


@dataclass(frozen=True)
class Estimate:
    prompt_set: str
    n_prompts: int
    rows: tuple[StageEstimate, ...]
    wall_s: float  # expected
    assumptions: tuple[str, ...]
    lower_s: float = 0.0  # never above what the run takes

    @property
    def calls(self) -> int:
        return sum(r.calls for r in self.rows)

    @property
    def input_tokens(self) -> float:
        return sum(r.input_tokens for r in self.rows)

    @property
    def output_tokens(self) -> float:
        return sum(r.output_tokens for r in self.rows)

    @property
    def unpriced(self) -> list[str]:
        return list(dict.fromkeys(r.model for r in self.rows if r.cost_usd is None))

    @property
    def cost_usd(self) -> float | None:
        """None when any model's cost is unknown."""
        costs = [r.cost_usd for r in self.rows]
        return None if None in costs else sum(c for c in costs if c is not None)

    @property
    def cost_cached_usd(self) -> float | None:
        """The cost with the prompt cache serving every repeated prefix (None: unknown)."""
        costs = [r.cost_cached_usd for r in self.rows]
        return None if None in costs else sum(c for c in costs if c is not None)

    @property
    def cached_input_tokens(self) -> float:
        return sum(r.cached_input_tokens for r in self.rows)
