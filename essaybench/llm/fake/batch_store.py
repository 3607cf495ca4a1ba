"""Batches and files the fake keeps for its life, their timed state machine, and counters.

Protocol-neutral: :mod:`.batch_openai` and :mod:`.batch_anthropic` put the wire formats on
top. A batch lives in memory until the server stops (not cleared by ``/_fake/reset``, which
zeroes only the counters), so a client that was killed can poll the same id again from a
new connection. Each batch runs as one task on the server's event loop following the
schedule of :class:`.batch_scenario.BatchScenario`; a line is answered by the protocol's
``respond`` callable, which asks the same per-model behaviour a direct call gets
(:mod:`.batch_engine`). Touched only on the server's event loop.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from essaybench.llm.fake.batch_scenario import BatchScenario
from essaybench.llm.fake.scenario import unit_hash

Kind = Literal["succeeded", "errored", "expired", "canceled"]
Phase = Literal["validating", "in_progress", "finalizing", "cancelling", "ended"]
End = Literal["completed", "failed", "expired", "cancelled"]


@dataclass(frozen=True)
class LineOutcome:
    """One line's answer in OpenAI's terms: status 200 and a chat.completion, an HTTP error
    status and ``{"error": {...}}``, or status 0 and ``error`` (no response: timed out)."""

    status: int
    body: dict[str, Any] | None
    error: dict[str, Any] | None = None  # OpenAI's line-level error {code, message}


@dataclass
class Item:
    custom_id: str
    request: Any  # what the protocol's respond() takes
    kind: Kind | None = None
    outcome: LineOutcome | None = None


@dataclass
class FileRecord:
    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int


@dataclass
class Batch:
    id: str
    protocol: Literal["openai", "anthropic"]
    items: list[Item]
    created_at: float  # wall clock (unix seconds)
    expires_at: float
    t0: float  # monotonic clock at creation
    errors: list[dict[str, Any]] = field(default_factory=list)  # validation errors (OpenAI)
    extra: dict[str, Any] = field(default_factory=dict)  # protocol fields (file ids, ...)
    phase: Phase = "validating"
    end: End | None = None
    stamps: dict[str, float] = field(default_factory=dict)  # "in_progress" -> wall clock
    cancel_requested: asyncio.Event = field(default_factory=asyncio.Event)
    polls: int = 0  # status reads (GET of the batch) so far
    polled_enough: asyncio.Event = field(default_factory=asyncio.Event)  # in_progress_polls

    def counts(self) -> Counter[str]:
        return Counter(item.kind or "processing" for item in self.items)

    def stamp(self, name: str) -> None:
        self.stamps.setdefault(name, time.time())


class BatchCounts(BaseModel):
    """The ``batch`` block of GET /_fake/stats: batch traffic, kept apart from direct calls."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    files_uploaded: int
    batches_created: int
    lines_received: int  # lines (OpenAI) or requests (Anthropic) of the batches created
    results_served: int  # result lines sent (output + error files, Anthropic results)
    result_downloads: int
    cancels: int  # cancel calls a client made that were accepted
    provider_cancels: int  # cancels the scenario made (cancel_after_items)
    by_end: dict[str, int]  # batches ended: completed / failed / expired / cancelled
    by_kind: dict[str, int]  # lines ended: succeeded / errored / expired / canceled
    per_model: dict[str, dict[str, int]]  # model calls made through batches: received, completed
    faults: dict[str, int]  # scenario fault rules fired on batch lines, by kind
    received_per_key: dict[str, int]  # {"1": bodies sent to a model once via batches, ...}
    batches_per_custom_id: dict[str, int]  # {"1": custom_ids seen in one batch, "2": ...}
    per_key: dict[str, int] | None = None  # body hash -> model calls via batches (?per_key=1)
    per_custom_id: dict[str, int] | None = None  # custom_id -> batches it came in (?per_key=1)


class BatchCounters:
    def __init__(self) -> None:
        self.files_uploaded = self.batches_created = self.lines_received = 0
        self.results_served = self.result_downloads = self.cancels = self.provider_cancels = 0
        self.by_end: Counter[str] = Counter()
        self.by_kind: Counter[str] = Counter()
        self.model_received: Counter[str] = Counter()
        self.model_completed: Counter[str] = Counter()
        self.faults: Counter[str] = Counter()
        self.keys: Counter[str] = Counter()
        self.custom_ids: Counter[str] = Counter()

    def stats(self, per_key: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            name: getattr(self, name) for name in (
                "files_uploaded", "batches_created", "lines_received", "results_served",
                "result_downloads", "cancels", "provider_cancels")}
        out |= {
            "by_end": dict(sorted(self.by_end.items())),
            "by_kind": dict(sorted(self.by_kind.items())),
            "per_model": {m: {"received": n, "completed": self.model_completed[m]}
                          for m, n in sorted(self.model_received.items())},
            "faults": dict(sorted(self.faults.items())),
            "received_per_key": _histogram(self.keys),
            "batches_per_custom_id": _histogram(self.custom_ids),
        }
        if per_key:
            out["per_key"] = dict(self.keys)
            out["per_custom_id"] = dict(self.custom_ids)
        return out


def _histogram(counts: Counter[str]) -> dict[str, int]:
    return {str(n): k for n, k in sorted(Counter(counts.values()).items())}


Respond = Callable[[Item], LineOutcome]


class BatchStore:
    def __init__(self, scenario: BatchScenario) -> None:
        self.scenario = scenario
        self.files: dict[str, FileRecord] = {}
        self.batches: dict[str, Batch] = {}
        self.counters = BatchCounters()
        self.create_calls = 0
        self._tasks: set[asyncio.Task[None]] = set()

    def add_file(self, filename: str, purpose: str, data: bytes, *, upload: bool) -> FileRecord:
        record = FileRecord(f"file-{uuid.uuid4().hex[:24]}", filename, purpose, data,
                            int(time.time()))
        self.files[record.id] = record
        if upload:
            self.counters.files_uploaded += 1
        return record

    def forced_failure(self) -> bool:
        """Count one create call; True when the scenario says this batch fails as a whole."""
        self.create_calls += 1
        return self.create_calls <= self.scenario.fail_first_batches

    def create(self, batch_id: str, protocol: Literal["openai", "anthropic"], items: list[Item],
               respond: Respond, on_end: Callable[[Batch], None],
               errors: list[dict[str, Any]] | None = None, **extra: Any) -> Batch:
        now = time.time()
        batch = Batch(batch_id, protocol, items, now, now + self.scenario.window_s,
                      asyncio.get_running_loop().time(), errors or [], dict(extra))
        if protocol == "anthropic":
            batch.phase = "in_progress"
        self.batches[batch_id] = batch
        self.counters.batches_created += 1
        self.counters.lines_received += len(items)
        self.counters.custom_ids.update({item.custom_id for item in items})
        task = asyncio.get_running_loop().create_task(self._run(batch, respond, on_end))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return batch

    def polled(self, batch: Batch) -> None:
        """A client read the batch's status (``in_progress_polls`` counts these)."""
        batch.polls += 1
        if batch.polls >= self.scenario.in_progress_polls:
            batch.polled_enough.set()

    def cancel(self, batch: Batch, *, by_client: bool = True) -> bool:
        """Ask a running batch to cancel; False when it has ended already."""
        if batch.phase == "ended":
            return False
        if not batch.cancel_requested.is_set():
            batch.cancel_requested.set()
            batch.stamp("cancelling")
            if by_client:
                self.counters.cancels += 1
            else:
                self.counters.provider_cancels += 1
        return True

    async def _wait(self, batch: Batch, offset_s: float) -> bool:
        """Sleep until ``offset_s`` after the batch's creation; True if a cancel came first."""
        delay = batch.t0 + offset_s - asyncio.get_running_loop().time()
        if batch.cancel_requested.is_set():
            return True
        if delay > 0:
            try:
                await asyncio.wait_for(batch.cancel_requested.wait(), delay)
            except TimeoutError:
                return False
            return True
        return False

    async def _run(self, batch: Batch, respond: Respond, on_end: Callable[[Batch], None]) -> None:
        sc = self.scenario
        if batch.phase == "validating":
            if await self._wait(batch, sc.validate_s):
                return self._cancelled(batch, on_end)
            if batch.errors:
                return self._finish(batch, "failed", on_end)
            batch.phase = "in_progress"
        batch.stamp("in_progress")
        if sc.in_progress_polls and not batch.polled_enough.is_set():
            polled = asyncio.ensure_future(batch.polled_enough.wait())
            cancelled = asyncio.ensure_future(batch.cancel_requested.wait())
            await asyncio.wait({polled, cancelled}, return_when=asyncio.FIRST_COMPLETED)
            polled.cancel()
            cancelled.cancel()
            if batch.cancel_requested.is_set():
                return await self._cancel_rest(batch, on_end)
        for index, item in enumerate(batch.items):
            due = sc.due_s(index)
            if due > sc.window_s:
                if await self._wait(batch, sc.window_s):
                    return await self._cancel_rest(batch, on_end)
                for rest in batch.items[index:]:
                    rest.kind = "expired"
                return self._finish(batch, "expired", on_end)
            if await self._wait(batch, due):
                return await self._cancel_rest(batch, on_end)
            item.outcome = self._failure(item) or self._respond(respond, item)
            item.kind = "succeeded" if item.outcome.status == 200 else "errored"
            if sc.cancel_after_items is not None and index + 1 == sc.cancel_after_items:
                self.cancel(batch, by_client=False)
            if sc.per_item_s == 0 and index % 64 == 63:
                await asyncio.sleep(0)  # let polls in between a long instant batch
        if batch.cancel_requested.is_set():
            return await self._cancel_rest(batch, on_end)
        batch.phase = "finalizing"
        batch.stamp("finalizing")
        await asyncio.sleep(sc.finalize_s)
        self._finish(batch, "completed", on_end)

    def _respond(self, respond: Respond, item: Item) -> LineOutcome:
        """``respond(item)``; a bug of the fake's (or input deep enough to exhaust the stack)
        is that line's 500, counted as fault ``internal_error``, never a batch stuck forever."""
        try:
            return respond(item)
        except Exception as exc:  # RecursionError included
            self.counters.faults["internal_error"] += 1
            return LineOutcome(500, {"error": {"message": f"The fake failed on this line: {exc!r}",
                                           "type": "server_error", "param": None,
                                           "code": None}})

    def _failure(self, item: Item) -> LineOutcome | None:
        rule = self.scenario.fail
        if rule is None or not (item.custom_id in rule.custom_ids or (
                rule.rate is not None
                and unit_hash("batch-fail", item.custom_id, rule.seed) < rule.rate)):
            return None
        self.counters.faults["batch_item"] += 1
        return LineOutcome(rule.status, {"error": {
            "message": f"The fake failed this batch line on purpose (status {rule.status}).",
            "type": "server_error" if rule.status >= 500 else "invalid_request_error",
            "param": None, "code": None}})

    async def _cancel_rest(self, batch: Batch, on_end: Callable[[Batch], None]) -> None:
        batch.phase = "cancelling"
        for item in batch.items:
            if item.kind is None:
                item.kind = "canceled"
        await asyncio.sleep(self.scenario.cancel_s)
        self._cancelled(batch, on_end)

    def _cancelled(self, batch: Batch, on_end: Callable[[Batch], None]) -> None:
        for item in batch.items:
            if item.kind is None:
                item.kind = "canceled"
        self._finish(batch, "cancelled", on_end)

    def _finish(self, batch: Batch, end: End, on_end: Callable[[Batch], None]) -> None:
        batch.end = end
        batch.stamp(end)
        on_end(batch)
        batch.phase = "ended"  # last: a poll never sees "ended" before the result files
        self.counters.by_end[end] += 1
        self.counters.by_kind.update(item.kind for item in batch.items if item.kind)
