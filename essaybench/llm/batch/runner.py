"""Batch mode: calls sent through a provider's batch API at its batch price, with the
guarantees of direct calls (``llm.gateway``).

``submit`` serves what the ledger already has (the gateway's scope rules), finds the
batches an earlier process of the same run left open (``journal``) and creates batches for
the rest only, recording each one before it is created at the provider; ``collect`` polls
each open batch once and, for those that ended, reads every line as a direct reply is read
(``llm.reply``: structured output, refusals, truncation; a reply needing a re-ask goes on as
a direct call with the rest of the entry's re-ask budget) and commits it to the ledger at
the batch price (``ModelSpec.cost_usd(..., batch=True)``, ``llm_calls.batched``). Lines the
batch did not answer (expired, cancelled, transient errors; a batch failed as a whole) are
resubmitted in a new batch, sent directly, or failed (``BatchOptions.on_expired``). ``run``
does both, polling with capped exponential backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime

import httpx

from essaybench.core.redact import redact
from essaybench.llm.backends import backend_class
from essaybench.llm.batch.anthropic_api import VERSION, AnthropicBatchApi
from essaybench.llm.batch.journal import BatchJournal, Submission
from essaybench.llm.batch.openai_api import OpenAIBatchApi
from essaybench.llm.batch.options import BatchOptions
from essaybench.llm.batch.results import Again, Reask, combine, result_of_line
from essaybench.llm.batch.ticket import BatchError, BatchTicket, Pending
from essaybench.llm.batch.wire import BatchApi, BatchApiError, BatchItem
from essaybench.llm.batching import Call
from essaybench.llm.gateway import Gateway
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult

__all__ = ["BatchRunner"]


class BatchRunner:
    def __init__(self, gateway: Gateway, options: BatchOptions | None = None, *,
                 on_step: Callable[[str], None] | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.gateway = gateway
        self.options = options or BatchOptions()
        self.journal = BatchJournal(gateway.ledger)
        self.on_step = on_step or (lambda step: None)  # tests kill the process at a step
        self.sleep = sleep
        self.run_id = gateway.scope.run_id
        self.transient_errors = 0  # polls that failed transiently (retried at the next poll)

    # -- the provider's API -----------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def api(self, model: str) -> AsyncIterator[BatchApi]:
        spec = self.gateway.spec(model)
        base = self.gateway.base_urls.get(model) or spec.base_url
        if not isinstance(base, str):
            raise ValueError(f"model {model!r}: batch mode needs one base URL, not replicas")
        key = spec.api_key()
        headers = ({"anthropic-version": VERSION, **({"x-api-key": key} if key else {})}
                   if spec.batch == "anthropic" else
                   {"Authorization": f"Bearer {key}"} if key else {})
        async with httpx.AsyncClient(base_url=base.rstrip("/"), headers=headers,
                                     timeout=spec.timeout_s) as http:
            yield AnthropicBatchApi(http) if spec.batch == "anthropic" else OpenAIBatchApi(http)

    def _redacted(self, exc: BaseException) -> str:
        return redact(str(exc))

    # -- submit -----------------------------------------------------------------------------

    async def submit(self, requests: Sequence[ChatRequest]) -> BatchTicket:
        for model in dict.fromkeys(r.model for r in requests):
            spec = self.gateway.spec(model)
            if spec.batch == "none":
                raise ValueError(f"model {model!r} has batch: none in the registry")
            spec.api_key()  # a missing key fails before anything is sent
        calls = [self.gateway.prepare(r) for r in requests]
        first: dict[str, Call] = {}
        for call in calls:
            first.setdefault(call.key, call)
        ticket = BatchTicket(list(requests), [c.key for c in calls], first)
        ticket.results.update(self.gateway.lookup_ok(list(ticket.calls)))
        wanted = [k for k in ticket.calls if k not in ticket.results]
        # Within a run (not a script's unattributed calls) a call is answered once.
        since = self.journal.settled_since(wanted, self.run_id) if self.run_id else None
        if since is not None:  # answered by a batch of this run, failures included
            ticket.results.update(self.gateway.ledger.lookup_ok(wanted, since,
                                                                self.gateway.scope))
            wanted = [k for k in wanted if k not in ticket.results]
        ticket.rounds.update(self.journal.rounds(wanted, self.run_id))
        for sub in self.journal.open_submissions(wanted, self.run_id):
            if sub.state == "submitting":
                sub = await self._adopt(sub)
                if sub.state != "open":
                    continue
            ticket.open[sub.submission_id] = sub
        in_batch = {k for sub in ticket.open.values() for k in sub.keys}
        await self._submit_keys(ticket, [k for k in wanted if k not in in_batch])
        return ticket

    async def _adopt(self, sub: Submission) -> Submission:
        """A submission recorded by a killed process before it learnt the provider's id:
        the batch it created, if any; else marked failed (its calls are submitted anew)."""
        async with self.api(sub.model) as api:
            found = await api.find(sub.submission_id, len(sub.keys), sub.created_at,
                                   self.journal.known_batch_ids())
        if found is None:
            self.journal.update(sub.submission_id, "failed", error="never created")
            return dataclasses.replace(sub, state="failed")
        self.journal.update(sub.submission_id, "open", batch_id=found)
        return dataclasses.replace(sub, state="open", batch_id=found)

    async def _submit_keys(self, ticket: BatchTicket, keys: Sequence[str]) -> None:
        by_model: dict[str, list[str]] = {}
        for key in keys:
            by_model.setdefault(ticket.calls[key].request.model, []).append(key)
        size = self.options.max_items
        for model, model_keys in by_model.items():
            for i in range(0, len(model_keys), size):
                await self._create(ticket, model, model_keys[i:i + size])

    async def _create(self, ticket: BatchTicket, model: str, keys: list[str]) -> None:
        spec = self.gateway.spec(model)
        sub = self.journal.begin(spec.batch, model, spec.base_url, self.run_id, keys)
        self.on_step("intent")
        ticket.rounds.update(keys)
        try:
            async with self.api(model) as api:
                items = [BatchItem(k, ticket.calls[k].request) for k in keys]
                batch_id = await api.create(spec, items, sub.submission_id)
        except (BatchApiError, httpx.HTTPError) as exc:
            message = self._redacted(exc)
            self.journal.update(sub.submission_id, "failed", error=message)
            if isinstance(exc, BatchApiError) and not exc.transient:
                raise BatchError(f"model {model!r}: {message}") from None
            await self._again(ticket, {k: Again("batch_failed", message) for k in keys})
            return
        self.on_step("created")
        self.journal.update(sub.submission_id, "open", batch_id=batch_id)
        self.on_step("recorded")
        ticket.open[sub.submission_id] = Submission(
            sub.submission_id, batch_id, sub.provider, model, "open", sub.created_at,
            tuple(keys))

    # -- collect ----------------------------------------------------------------------------

    async def collect(self, ticket: BatchTicket) -> list[ChatResult] | Pending:
        """Poll each open batch once; collect those that ended. The results in request
        order once every call has one, else ``Pending``."""
        if ticket.resubmit:
            keys, ticket.resubmit = ticket.resubmit, []
            await self._submit_keys(ticket, keys)
        for sub in list(ticket.open.values()):
            await self._poll(ticket, sub)
        if ticket.open or ticket.resubmit:
            subs = list(ticket.open.values())
            return Pending(tuple(s.batch_id or "" for s in subs),
                           sum(len(s.keys) for s in subs) + len(ticket.resubmit),
                           tuple(s.model for s in subs),
                           tuple(ticket.status.get(s.submission_id, "submitted") for s in subs))
        return [ticket.results[k] for k in ticket.keys]

    async def run(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        """Submit, then poll with capped exponential backoff until every call has a result."""
        ticket = await self.submit(requests)
        polls = 0
        while not isinstance(out := await self.collect(ticket), list):
            await self.sleep(self.options.delay(polls))
            polls += 1
        return out

    async def cancel(self, ticket: BatchTicket) -> None:
        """Ask the provider to cancel every open batch; ``collect`` then gathers what they
        answered and handles the rest by the on_expired policy."""
        for sub in ticket.open.values():
            if sub.batch_id is not None:
                async with self.api(sub.model) as api:
                    await api.cancel(sub.batch_id)

    async def _poll(self, ticket: BatchTicket, sub: Submission) -> None:
        assert sub.batch_id is not None
        try:
            async with self.api(sub.model) as api:
                state = await api.state(sub.batch_id)
                ticket.status[sub.submission_id] = state.status
                self.on_step("polled")
                if not state.ended:
                    return
                lines = {} if state.failed else await api.results(state, sub.batch_id)
        except (BatchApiError, httpx.HTTPError) as exc:
            if isinstance(exc, BatchApiError) and not exc.transient:
                raise BatchError(f"batch {sub.batch_id}: {self._redacted(exc)}") from None
            self.transient_errors += 1
            return  # the provider's trouble: polled again next time
        spec = self.gateway.spec(sub.model)
        now = datetime.now(UTC)
        finals: dict[str, ChatResult] = {}
        again: dict[str, Again] = {}
        for key in sub.keys:
            call = ticket.calls.get(key)
            if call is None or key in ticket.results:
                continue  # another process's call, or served meanwhile
            out = (Again("batch_failed", state.failed) if state.failed else
                   result_of_line(spec, key, call.request, lines.get(key), sub.created_at, now))
            if isinstance(out, Again):
                again[key] = out
            elif isinstance(out, Reask):
                finals[key] = combine(out.first, await self._reask(call, out))
            else:
                finals[key] = out
        await self._record(ticket, finals)  # each row says batched (ChatResult.batched)
        self.journal.update(sub.submission_id, "failed" if state.failed else "collected",
                            provider_status=state.status, error=state.failed and
                            redact(state.failed))
        del ticket.open[sub.submission_id]
        await self._again(ticket, again)

    async def _reask(self, call: Call, reask: Reask) -> ChatResult:
        """The rest of a call whose batch reply needs a re-ask, sent directly with the rest
        of the entry's re-ask budget (as the direct call would have gone on)."""
        spec = self.gateway.spec(call.request.model)
        rest = spec.model_copy(update={"max_reasks": spec.max_reasks - 1})
        backend = backend_class(spec.protocol)(rest, self.gateway.base_urls.get(spec.name),
                                                backoff=self.gateway.backoff,
                                                seed=self.gateway.seed)
        try:
            request = call.request.model_copy(update={"messages": tuple(reask.messages)})
            return await backend.complete(request, key=call.key)
        finally:
            await backend.aclose()

    async def _record(self, ticket: BatchTicket, finals: dict[str, ChatResult]) -> None:
        redacted = {k: self.gateway.redact(r) for k, r in finals.items()}
        await asyncio.gather(*(self.gateway.record(ticket.calls[k], r)
                               for k, r in redacted.items()))
        ticket.results.update(redacted)

    async def _again(self, ticket: BatchTicket, again: dict[str, Again]) -> None:
        """Lines a batch did not answer, by the on_expired policy."""
        if not again:
            return
        policy = self.options.on_expired
        if policy == "direct":
            requests = [ticket.calls[k].request for k in again]
            sent = await self.gateway.run(requests, direct=True)
            for key, result in zip(again, sent, strict=True):
                ticket.results[key] = result
            return
        failed: dict[str, ChatResult] = {}
        now = datetime.now(UTC)
        for key, why in again.items():
            if policy == "resubmit" and ticket.rounds[key] <= self.options.max_resubmits:
                ticket.resubmit.append(key)
                continue
            request = ticket.calls[key].request
            failed[key] = ChatResult(key=key, model=request.model, status=CallStatus.API_ERROR,
                                     error_kind=why.error_kind, error=why.error, attempts=1,
                                     finished_at=now, stage=request.stage, tag=request.tag)
        await self._record(ticket, failed)
