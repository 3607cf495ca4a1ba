"""How the fake's batch APIs (OpenAI Batch, Anthropic Message Batches) behave: the ``batch:``
block of a scenario.

Example::

    batch:
      validate_s: 0.2          # OpenAI: "validating" this long before anything runs
      delay_s: 1.0             # then "in_progress" this long before the first line is answered
      in_progress_polls: 2     # and no line answered before its status was read twice
      per_item_s: 0.05         # one line answered every 0.05 s, in input order
      window_s: 3.0            # the completion window: lines not answered by then expire
      fail: {custom_ids: [c7], rate: 0.1, seed: 3, status: 500}   # partial failure
      fail_first_batches: 1    # the first batch created fails as a whole
      cancel_after_items: 5    # the provider cancels each batch after 5 answered lines

All times run from the batch's creation on the server's monotonic clock; line ``i``
(0-based) is due at ``validate_s + delay_s + (i + 1) * per_item_s``, and a line due after
``window_s`` expires, so how many lines a window lets through is a pure function of the
scenario and the number of lines, never of scheduling noise. ``in_progress_polls`` holds
every line until the batch's status has been read that many times (a wait counted in a
client's polls: the poll after the N-th finds the lines answered, however slow the client).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

DAY_S = 86_400.0


class BatchItemFailure(BaseModel):
    """Lines answered with an error instead of reaching the model (partial failure)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    custom_ids: tuple[str, ...] = Field(default=(), description="These custom_ids fail.")
    rate: float | None = Field(default=None, ge=0, le=1,
                               description="Also fail a line when hash(custom_id, seed) < rate.")
    seed: int = Field(default=0, description="Seed of the rate decision.")
    status: Literal[400, 408, 429, 500, 503] = Field(
        default=500, description="HTTP status of the line's error (OpenAI: response.status_code; "
                                 "Anthropic: the error type it maps to).")

    @model_validator(mode="after")
    def _something(self) -> BatchItemFailure:
        if not self.custom_ids and self.rate is None:
            raise ValueError("batch.fail needs custom_ids, a rate, or both")
        return self


class BatchScenario(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    validate_s: float = Field(default=0.0, ge=0, description="Seconds in 'validating' (OpenAI).")
    delay_s: float = Field(default=0.0, ge=0,
                           description="Seconds in progress before the first line is answered.")
    per_item_s: float = Field(default=0.0, ge=0, description="Seconds per answered line.")
    in_progress_polls: int = Field(
        default=0, ge=0, description="No line is answered before the batch's status has been "
        "read (GET) this many times; the due times then apply from creation as before.")
    finalize_s: float = Field(default=0.0, ge=0, description="Seconds in 'finalizing' (OpenAI).")
    cancel_s: float = Field(default=0.0, ge=0,
                            description="Seconds in 'cancelling'/'canceling' before it ends.")
    window_s: float = Field(default=DAY_S, gt=0,
                            description="The completion window ('24h' on the wire): lines not "
                                        "answered by then expire.")
    fail: BatchItemFailure | None = Field(default=None, description="Partial failure.")
    fail_first_batches: int = Field(
        default=0, ge=0, description="The first N batches created fail as a whole (OpenAI: "
        "status 'failed', errors code token_limit_exceeded; Anthropic: create answers 429).")
    cancel_after_items: int | None = Field(
        default=None, ge=1, description="The provider cancels each batch once this many lines "
                                        "are answered (as an operator's cancel would).")
    max_lines: int = Field(default=50_000, ge=1,
                           description="Most lines (OpenAI) or requests (Anthropic) per batch.")
    max_file_bytes: int = Field(default=200 * 1024 * 1024, ge=1,
                                description="Largest upload (OpenAI) or create body (Anthropic).")

    def due_s(self, index: int) -> float:
        """Seconds after creation at which line ``index`` (0-based) is answered."""
        return self.validate_s + self.delay_s + (index + 1) * self.per_item_s
