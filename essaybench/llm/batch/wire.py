"""What every provider's batch API gives back, in one shape (``openai_api``, ``anthropic_api``).

A result line is either a chat.completion body (an Anthropic message is put in that shape,
so ``llm.reply`` reads both alike), or an error: ``kind`` ``errored`` (the line's request
failed: ``status`` is its HTTP status), ``expired`` (the completion window ended first) or
``canceled`` (the batch was cancelled first).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

import httpx

from essaybench.llm.registry import ModelSpec
from essaybench.llm.types import ChatRequest

__all__ = [
    "BatchApi",
    "BatchApiError",
    "BatchItem",
    "BatchState",
    "Line",
    "check_custom_id",
    "http_error",
]

# Anthropic's rule; OpenAI's custom_ids are any string, so one rule serves both.
_CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
ERROR_TEXT_LIMIT = 500


class BatchApiError(RuntimeError):
    """A batch API call failed; ``transient``: worth trying again later (429, 5xx, network)."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


def http_error(what: str, response: httpx.Response) -> BatchApiError:
    """The error of a non-2xx answer; the body is untrusted text (the caller redacts it)."""
    status = response.status_code
    text = response.text[:ERROR_TEXT_LIMIT]
    return BatchApiError(f"{what}: HTTP {status}: {text}",
                         transient=status in (408, 409, 429) or status >= 500)


def check_custom_id(custom_id: str) -> str:
    if not _CUSTOM_ID.fullmatch(custom_id):
        raise ValueError(f"custom_id {custom_id!r} is not 1-64 characters of [a-zA-Z0-9_-]")
    return custom_id


@dataclass(frozen=True)
class BatchItem:
    """One call to put in a batch: its custom_id (the ledger key) and request."""

    custom_id: str
    request: ChatRequest


@dataclass(frozen=True)
class Line:
    custom_id: str
    payload: dict[str, Any] | None = None  # a chat.completion body
    kind: Literal["succeeded", "errored", "expired", "canceled"] = "succeeded"
    status: int | None = None  # errored: the HTTP status the line's request got (0: none)
    code: str | None = None  # the provider's error code or type
    error: str | None = None


@dataclass(frozen=True)
class BatchState:
    status: str  # the provider's word (validating, in_progress, ended, completed, ...)
    ended: bool
    failed: str | None = None  # ended as a whole without running its lines: why
    info: dict[str, Any] | None = None  # what fetching the results needs


class BatchApi(Protocol):
    """One provider's batch protocol over an open HTTP client."""

    name: str

    async def create(self, spec: ModelSpec, items: Sequence[BatchItem], marker: str) -> str:
        """Create the batch; its id. ``marker``: our submission id, kept where the provider
        keeps metadata (``find`` looks for it)."""
        ...

    async def find(self, marker: str, n_items: int, since: datetime,
                   known: set[str]) -> str | None:
        """The id of a batch created by an earlier process for submission ``marker`` and
        never recorded (killed between create and record), or None."""
        ...

    async def state(self, batch_id: str) -> BatchState: ...

    async def results(self, state: BatchState, batch_id: str) -> dict[str, Line]: ...

    async def cancel(self, batch_id: str) -> None: ...


def jsonl(rows: Sequence[Any]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n"
                   for r in rows).encode()


def read_jsonl(data: bytes) -> list[dict[str, Any]]:
    rows = [json.loads(x) for x in data.decode().splitlines() if x.strip()]
    return [r for r in rows if isinstance(r, dict) and isinstance(r.get("custom_id"), str)]
