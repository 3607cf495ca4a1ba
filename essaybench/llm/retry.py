"""Which failures are transient, and how long to wait before trying again.

This is the only place the gateway decides to retry. Transient: 429, 500, 502,
503, 504, timeouts, connection errors and a garbled 200 body (a proxy cut it).
Everything else fails fast with a classified ``error_kind``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
CONTEXT_LENGTH_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})
CONTEXT_LENGTH_PHRASES = ("context length", "maximum context", "context_length", "too many tokens",
                          "exceeds the context", "prompt is too long")
CONTENT_FILTER_CODES = frozenset({"content_filter", "content_policy_violation",
                                  "data_inspection_failed", "sensitive_content"})


@dataclass(frozen=True)
class Backoff:
    base_s: float = 0.5
    cap_s: float = 30.0
    max_retry_after_s: float = 120.0

    def delay(self, retry: int, rng: random.Random, retry_after_s: float | None = None) -> float:
        """Seconds before retry number ``retry`` (0-based): Retry-After, else full jitter."""
        if retry_after_s is not None:
            # A little jitter on top so a crowd told "wait 2 s" does not return as one.
            return min(retry_after_s, self.max_retry_after_s) + rng.uniform(0, self.base_s / 2)
        return rng.uniform(0, min(self.cap_s, self.base_s * (2 ** retry)))


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date; None if absent or unreadable."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def classify_http_error(status: int, code: str | None, message: str) -> tuple[bool, str]:
    """(transient?, error_kind) for a non-200 response."""
    lowered = message.lower()
    if status in TRANSIENT_STATUS:
        return True, f"http_{status}"
    if (code in CONTEXT_LENGTH_CODES) or any(p in lowered for p in CONTEXT_LENGTH_PHRASES):
        return False, "context_length"
    if code in CONTENT_FILTER_CODES or "content filter" in lowered or "content_filter" in lowered:
        return False, "content_filter"
    return False, f"http_{status}"
