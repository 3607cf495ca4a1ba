"""How batch mode behaves: polling, and what happens to lines a batch did not answer."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["BatchOptions", "OnExpired"]

OnExpired = Literal["resubmit", "direct", "fail"]


class BatchOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    on_expired: OnExpired = Field(
        default="resubmit", description="Lines that expired, were cancelled, or failed "
        "transiently (429, 5xx, timeout), and batches failed as a whole: resubmit (in a new "
        "batch, at most max_resubmits times, then failed), direct (sent as direct calls "
        "through the gateway) or fail (recorded as api_error).")
    max_resubmits: int = Field(default=2, ge=0, description="New batches per call, at most.")
    poll_initial_s: float = Field(default=10.0, gt=0, description="First wait between polls.")
    poll_factor: float = Field(default=2.0, ge=1, description="Each wait is this times the "
                               "last one ...")
    poll_max_s: float = Field(default=600.0, gt=0, description="... up to this cap.")
    max_items: int = Field(default=50_000, ge=1, description="Most calls per batch.")

    @model_validator(mode="after")
    def _cap(self) -> BatchOptions:
        if self.poll_max_s < self.poll_initial_s:
            raise ValueError("poll_max_s must be at least poll_initial_s")
        return self

    def delay(self, polls: int) -> float:
        """The wait before poll number ``polls + 1`` (capped exponential backoff)."""
        return min(self.poll_max_s, self.poll_initial_s * self.poll_factor ** min(polls, 60))
