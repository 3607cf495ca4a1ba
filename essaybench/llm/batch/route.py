"""Which calls of a gateway run go through a provider's batch API, and how the run waits.

``Gateway.run`` hands this module (the gateway's ``batches``, installed by ``open_gateway``)
the calls of entries whose registry ``batch`` is ``openai`` or ``anthropic``
(``Gateway.batched``); the others go direct as before. They are
submitted first (the provider's 24 h window starts as early as it can), the direct calls
run meanwhile, and then the run waits as its gateway's ``BatchWaiting`` says:

- ``poll``: poll with capped exponential backoff until every batch ended, one progress line
  per poll naming each open batch and its state (the plain CLI, a script);
- ``return``: poll once; if a batch is still open, raise :class:`BatchesPending` (after the
  direct calls finished and were recorded). The caller gives the process up and enters
  again later (the Prefect flow suspends itself: ``essaybench.flows.batch_wait``); the
  journal then finds the same batches by the run id, so nothing is submitted twice.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal

from essaybench.core.errors import UserError
from essaybench.llm.batch.options import BatchOptions
from essaybench.llm.batch.runner import BatchRunner
from essaybench.llm.batch.ticket import BatchTicket, Pending
from essaybench.llm.batching import Call
from essaybench.llm.gateway import Gateway
from essaybench.llm.progress import LOGGER_NAME, current_progress, duration
from essaybench.llm.registry import Registry
from essaybench.llm.types import ChatResult

__all__ = [
    "BatchRoute",
    "BatchWaiting",
    "BatchesPending",
    "Waiting",
    "refuse_in_shards",
]

BatchWaiting = Literal["poll", "return"]
logger = logging.getLogger(LOGGER_NAME)


class BatchesPending(RuntimeError):
    """Calls wait in open provider batches (``BatchWaiting`` ``return``): enter the run
    again later; it collects the same batches (``llm_batches``) and submits nothing twice.
    A stage that raises it is recorded as ``waiting``, not failed (``store.run_stage``)."""

    stage_status = "waiting"

    def __init__(self, pending: Pending) -> None:
        super().__init__(pending.describe())
        self.pending = pending

    def __reduce__(self) -> tuple[type[BatchesPending], tuple[Pending]]:
        return type(self), (self.pending,)


def refuse_in_shards(registry: Registry, models: Sequence[str]) -> None:
    """A sharded run cannot use batch entries: a shard's ledger (Parquet parts) has no
    batch journal, so a killed shard could not find its batches again."""
    batched = [n for n in models if registry.get(n).batch != "none"]
    if batched:
        raise UserError(f"model {batched[0]!r} has batch: {registry.get(batched[0]).batch} "
                        "in the registry: batch mode is not supported in a sharded run (a "
                        "shard's ledger has no batch journal); run without shards "
                        "(sharding: null or --shards 0) or set batch: none")


class BatchRoute:
    """A gateway's ``BatchPort``: ``submit`` a run's batched calls; the handle waits."""

    def __init__(self, gateway: Gateway, options: BatchOptions | None = None,
                 waiting: BatchWaiting = "poll") -> None:
        self.gateway = gateway
        self.options = options or BatchOptions()
        self.waiting: BatchWaiting = waiting

    @classmethod
    def install(cls, gateway: Gateway, options: BatchOptions | None = None,
                waiting: BatchWaiting = "poll") -> BatchRoute:
        """Send ``gateway``'s calls of entries with a batch API through it."""
        route = cls(gateway, options, waiting)
        gateway.batches = route
        return route

    def note(self, line: str) -> None:
        """A progress line: to the process's progress display when it takes notes, and to
        the ``essaybench.progress`` log (a Prefect flow run's log)."""
        observer = self.gateway.observer or current_progress()
        show = getattr(observer, "note", None)
        if callable(show):
            show(line)
        else:
            logger.info("%s", line)

    async def submit(self, calls: Sequence[Call]) -> Waiting:
        runner = BatchRunner(self.gateway, self.options)
        return Waiting(self, runner, await runner.submit([c.request for c in calls]))


class Waiting:
    """The batches one gateway run submitted."""

    def __init__(self, route: BatchRoute, runner: BatchRunner, ticket: BatchTicket) -> None:
        self.route, self.runner, self.ticket = route, runner, ticket

    async def wait(self) -> dict[str, ChatResult]:
        """Every call's result by key (polling until done), or ``BatchesPending``."""
        polls = 0
        while isinstance(out := await self.runner.collect(self.ticket), Pending):
            if self.route.waiting == "return":
                self.route.note(f"batch mode: {out.describe()}; the run waits without a "
                                "process")
                raise BatchesPending(out)
            delay = self.runner.options.delay(polls)
            wait = f"{delay:.1f}s" if delay < 10 else duration(delay)
            self.route.note(f"batch mode: {out.describe()}; next poll in {wait}")
            await self.runner.sleep(delay)
            polls += 1
        return dict(zip(self.ticket.keys, out, strict=True))
