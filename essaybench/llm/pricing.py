"""What a call really cost: the one rule every cost figure comes from.

A call's cost, in USD, from its registry entry's prices and what the provider reported::

    (uncached input × input price + cached input × cached-input price
     + output × output price) / 10⁶ × batch factor (batch API only) × off-peak factor

- Cached input: the input tokens the provider's usage block says it served from its
  prompt cache (``prompt_tokens_details.cached_tokens``, DeepSeek's
  ``prompt_cache_hit_tokens``; see ``llm.usage``). An entry without
  ``price_cached_input_per_mtok`` bills them at the input price. A call whose provider
  reported no cached-token figure is priced as if nothing was cached: at the full input
  price, an upper bound when the provider discounts cached input (``UPPER_BOUND_NOTE``).
- Batch: ``batch_price_factor`` multiplies a call sent through a provider's batch API.
- Off-peak: the first ``off_peak`` period whose UTC window holds the moment the call
  finished multiplies its cost by that period's factor.
- Unknown stays unknown: no price, or no token counts, is None, never a guess; an entry
  priced at zero in and out costs 0.0 whatever it reported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, time
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["UPPER_BOUND_NOTE", "OffPeak", "Priced", "call_cost", "price_factor"]

UPPER_BOUND_NOTE = ("priced without a cached-input figure from the provider: at the full "
                    "input price, an upper bound where the provider discounted cached input")

Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
_WEEKDAYS: tuple[Weekday, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_HHMM_RE = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])$")


def _parse_hhmm(value: Any, field: str, *, allow_24: bool = False) -> time | None:
    """``HH:MM`` (UTC) as a time; None for ``24:00`` (the end of the day) when allowed."""
    if isinstance(value, int) and not isinstance(value, bool):
        # YAML 1.1 reads an unquoted 16:30 as the base-60 number 990.
        raise ValueError(f"{field} must be a quoted \"HH:MM\" string (YAML reads an "
                         "unquoted time such as 16:30 as a number)")
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a \"HH:MM\" string (UTC)")
    if allow_24 and value == "24:00":
        return None
    found = _HHMM_RE.match(value)
    if found is None:
        raise ValueError(f"{field} must be \"HH:MM\" in UTC, 00:00 to 23:59"
                         + (" (or 24:00)" if allow_24 else ""))
    return time(int(found[1]), int(found[2]))


class OffPeak(BaseModel):
    """A discounted period: a daily UTC window, on some weekdays, at a price factor.

    The window holds a moment whose UTC clock time is at or after ``start`` and before
    ``end`` on one of ``days`` (that moment's own UTC weekday). ``end`` before ``start``
    wraps past midnight (16:30-00:30 holds 23:00 and 00:10); ``start`` equal to ``end``
    is the whole day."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    start: str = Field(description="Window start, \"HH:MM\" UTC (inclusive).")
    end: str = Field(description="Window end, \"HH:MM\" UTC (exclusive; 24:00 = midnight).")
    price_factor: float = Field(gt=0, le=1, description="Cost multiplier in the window, "
                                "0 < f <= 1 (0.5 = half price).")
    days: tuple[Weekday, ...] = Field(
        default=_WEEKDAYS, min_length=1, description="UTC weekdays the window applies on "
        "(mon … sun; default every day).")

    @field_validator("start", mode="before")
    @classmethod
    def _check_start(cls, v: Any) -> str:
        _parse_hhmm(v, "off_peak start")
        return str(v)

    @field_validator("end", mode="before")
    @classmethod
    def _check_end(cls, v: Any) -> str:
        _parse_hhmm(v, "off_peak end", allow_24=True)
        return str(v)

    @model_validator(mode="after")
    def _distinct_days(self) -> OffPeak:
        if len(set(self.days)) != len(self.days):
            raise ValueError("off_peak days must not repeat a weekday")
        return self

    def holds(self, at: datetime) -> bool:
        """Whether the moment ``at`` (aware; naive is taken as UTC) is in this period."""
        utc = at.astimezone(UTC) if at.tzinfo is not None else at.replace(tzinfo=UTC)
        if _WEEKDAYS[utc.weekday()] not in self.days:
            return False
        start = _parse_hhmm(self.start, "start")
        end = _parse_hhmm(self.end, "end", allow_24=True)
        assert start is not None
        now = utc.time().replace(tzinfo=None)
        if end is None:  # 24:00
            return now >= start
        if start == end:
            return True
        if start < end:
            return start <= now < end
        return now >= start or now < end  # wraps past midnight


class Priced(Protocol):
    """The prices of a registry entry (``registry.ModelSpec``) the rule reads."""

    @property
    def price_input_per_mtok(self) -> float | None: ...
    @property
    def price_output_per_mtok(self) -> float | None: ...
    @property
    def price_cached_input_per_mtok(self) -> float | None: ...
    @property
    def batch_price_factor(self) -> float | None: ...
    @property
    def off_peak(self) -> Sequence[OffPeak]: ...


def price_factor(spec: Priced, *, batch: bool = False,
                 finished_at: datetime | None = None) -> float:
    """The multiplier on list prices for a call: batch factor × off-peak factor."""
    factor = (spec.batch_price_factor or 1.0) if batch else 1.0
    if finished_at is not None:
        for period in spec.off_peak:
            if period.holds(finished_at):
                factor *= period.price_factor
                break
    return factor


def call_cost(spec: Priced, input_tokens: int | None, output_tokens: int | None,
              cached_input_tokens: int | None = None, *, batch: bool = False,
              finished_at: datetime | None = None) -> float | None:
    """What one call cost (USD), by the module's rule; None when unknown.

    ``input_tokens`` counts every input token, cached ones included (as the providers'
    ``prompt_tokens`` does); ``cached_input_tokens`` is the part served from the cache
    (None: not reported, priced as uncached). ``finished_at``: when the call finished
    (off-peak periods); None applies no off-peak factor."""
    pin, pout = spec.price_input_per_mtok, spec.price_output_per_mtok
    if pin is None or pout is None:
        return None
    if pin == 0 and pout == 0:
        return 0.0
    if input_tokens is None or output_tokens is None:
        return None
    cached = min(max(cached_input_tokens or 0, 0), input_tokens)
    pcached = spec.price_cached_input_per_mtok
    if pcached is None:
        pcached = pin
    usd = ((input_tokens - cached) * pin + cached * pcached + output_tokens * pout) / 1_000_000
    return usd * price_factor(spec, batch=batch, finished_at=finished_at)
