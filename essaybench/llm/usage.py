"""Token counts from a provider's usage block: untrusted data, read defensively.

Each provider names the cached part of the input its own way:

- OpenAI (and most compatible APIs): ``usage.prompt_tokens_details.cached_tokens``, part
  of ``prompt_tokens``;
- DeepSeek: ``usage.prompt_cache_hit_tokens`` (with ``prompt_cache_miss_tokens``), also
  part of ``prompt_tokens``;
- Anthropic's Messages API: ``input_tokens`` counts only the uncached input, beside
  ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` (``anthropic_usage``).

A cached figure that is not a non-negative integer (a bool is not a count), or is above
the input it is part of, is ignored: the call stays ok, its cached input is unknown and
its cost is priced as if nothing was cached (``llm.pricing``). An input or output count
that is there but not a non-negative integer makes the reply's usage unknown (None), and
so its cost; a missing one counts 0, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ReadUsage", "anthropic_usage", "openai_usage"]


@dataclass(frozen=True)
class ReadUsage:
    """One reply's counts: input (cached part included), output, and the cached part
    (None: not believable; for the cached part also: not reported)."""

    input_tokens: int | None
    output_tokens: int | None
    cached_input_tokens: int | None


def _count(value: Any) -> int | None:
    """A token count, or None for anything that is not a non-negative integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _cached(value: Any, of: int | None) -> int | None:
    count = _count(value)
    return count if count is not None and of is not None and count <= of else None


def _total(usage: Mapping[str, Any], name: str) -> int | None:
    """A required count: 0 when missing, None when there but not believable."""
    return _count(usage[name]) if usage.get(name) is not None else 0


def openai_usage(usage: Mapping[str, Any]) -> ReadUsage:
    """An OpenAI-compatible chat completion's usage block (DeepSeek's fields included)."""
    prompt = _total(usage, "prompt_tokens")
    completion = _total(usage, "completion_tokens")
    cached: int | None = None
    details = usage.get("prompt_tokens_details")
    if isinstance(details, Mapping) and "cached_tokens" in details:
        cached = _cached(details.get("cached_tokens"), prompt)
    if cached is None and "prompt_cache_hit_tokens" in usage:
        hit = _cached(usage.get("prompt_cache_hit_tokens"), prompt)
        miss = usage.get("prompt_cache_miss_tokens")
        # hit + miss = prompt when both are given; a pair that disagrees is not believed
        if hit is not None and prompt is not None and (
                miss is None or _count(miss) == prompt - hit):
            cached = hit
    return ReadUsage(prompt, completion, cached)


def anthropic_usage(usage: Mapping[str, Any]) -> ReadUsage:
    """An Anthropic Messages usage block: input = uncached + cache reads + cache writes;
    cached = cache reads (cache writes are billed here at the input price)."""
    uncached = _total(usage, "input_tokens")
    read = _count(usage.get("cache_read_input_tokens"))
    written = _total(usage, "cache_creation_input_tokens")
    total = None if uncached is None or written is None else uncached + (read or 0) + written
    return ReadUsage(total, _total(usage, "output_tokens"), read)
