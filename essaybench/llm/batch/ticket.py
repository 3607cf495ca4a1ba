"""What a batch submission hands back (``BatchTicket``), what a poll says while batches
run (``Pending``), and the error of a batch API that refused for good (``BatchError``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from essaybench.llm.batch.journal import Submission
from essaybench.llm.batching import Call
from essaybench.llm.types import ChatRequest, ChatResult

__all__ = ["BatchError", "BatchTicket", "Pending"]


class BatchError(RuntimeError):
    """A batch API refused a request for good (bad key, bad request): redacted text."""


@dataclass
class BatchTicket:
    """What ``submit`` started: the requests, their calls, results known so far, the open
    submissions (by our id), keys waiting for a new batch, and batches each key was in."""

    requests: list[ChatRequest]
    keys: list[str]
    calls: dict[str, Call]
    results: dict[str, ChatResult] = field(default_factory=dict)
    open: dict[str, Submission] = field(default_factory=dict)
    resubmit: list[str] = field(default_factory=list)
    rounds: Counter[str] = field(default_factory=Counter)
    status: dict[str, str] = field(default_factory=dict)  # the provider's word, by our id


@dataclass(frozen=True)
class Pending:
    """Not done yet: the provider's ids of the open batches and how many calls wait;
    each open batch's model and last status (as ``batch_ids``)."""

    batch_ids: tuple[str, ...]
    waiting: int
    models: tuple[str, ...] = ()
    states: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line: each open batch with its model and state, and the calls waiting."""
        batches = [f"{b} ({m}: {s})" for b, m, s in
                   zip(self.batch_ids, self.models, self.states, strict=True)]
        return (f"{self.waiting} call{'' if self.waiting == 1 else 's'} waiting"
                + (f" in batch{'' if len(batches) == 1 else 'es'} {', '.join(batches)}"
                   if batches else " to be submitted again"))
