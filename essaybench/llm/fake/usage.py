"""The cached input the fake server reports in a reply's usage block.

As a provider with a warm prompt cache would: the leading system messages (the judge's
rubric, shared by every call of a genre) or a fixed number of prompt tokens, in the
fields the scenario's ``cache_report`` names. ``usage_extra`` is merged last, as given,
so a test can send fields no honest provider would (negative or oversized counts)."""

from __future__ import annotations

from typing import Any

from essaybench.llm.fake.protocol import ChatFields
from essaybench.llm.fake.scenario import ModelScenario

__all__ = ["usage_fields"]


def usage_fields(cfg: ModelScenario, chat: ChatFields) -> dict[str, Any] | None:
    """Fields to add to the usage block of a reply to ``chat`` (None: nothing to add)."""
    if cfg.cache_report == "none" and not cfg.usage_extra:
        return None
    cached = chat.system_tokens if cfg.cached_prefix == "system" else cfg.cached_prefix
    cached = min(cached, chat.prompt_tokens)
    out: dict[str, Any] = {}
    if cfg.cache_report == "openai":
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    elif cfg.cache_report == "deepseek":
        out["prompt_cache_hit_tokens"] = cached
        out["prompt_cache_miss_tokens"] = chat.prompt_tokens - cached
    return {**out, **cfg.usage_extra}
