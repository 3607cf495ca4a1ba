"""A gateway session: the ledger, the gateway, and the embedded server if a model needs it.

    with open_gateway(registry, store_root, ["smollm2-135m"], scope=scope) as session:
        results = session.run(requests)

``scope`` (a :class:`ReuseScope`) is the run the session's calls are recorded under and
the runs whose recorded calls it may serve; the default, ``ANY_RUN``, serves any
recorded call (a script, a test: nothing benchmark-like).

The embedded model's servers are started only when a requested model is the embedded
one, each on a free loopback port, and stopped when the session ends (also on errors and
Ctrl-C). Every embedded entry (writer configurations, the judge) shares one pool of
replicas (``llm.replicas``), so two cores do two calls at once. Its registry entry is
pinned to the GGUF file's hash so the ledger never mixes two model files.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from essaybench.core.errors import UserError
from essaybench.llm.batch.options import BatchOptions
from essaybench.llm.batch.route import BatchRoute, BatchWaiting, refuse_in_shards
from essaybench.llm.batching import FollowUp
from essaybench.llm.endpoints import host_endpoints
from essaybench.llm.gateway import Gateway, ProgressCallback, run_async
from essaybench.llm.ledger import Ledger
from essaybench.llm.part_ledger import PartLedger
from essaybench.llm.ratelimit import LimiterFactory, local_limiter
from essaybench.llm.registry import Registry
from essaybench.llm.replicas import ReplicaPool
from essaybench.llm.retry import Backoff
from essaybench.llm.scope import ANY_RUN, ReuseScope
from essaybench.llm.types import ChatRequest, ChatResult

if TYPE_CHECKING:
    from essaybench.llm.embedded import EmbeddedServer

LEDGER_FILE = "ledger.duckdb"
REPLICAS_ENV = "ESSAYBENCH_EMBEDDED_REPLICAS"


@dataclass
class GatewaySession:
    gateway: Gateway
    ledger: Ledger
    # Failures recorded since this moment are served, not re-sent (see Gateway.run);
    # set by a stage that follows its upstream within one run (reusing_failures_since).
    reuse_failed_since: datetime | None = None

    @property
    def scope(self) -> ReuseScope:
        return self.gateway.scope

    def run(self, requests: Sequence[ChatRequest],
            progress: ProgressCallback | None = None,
            follow_up: FollowUp | None = None) -> list[ChatResult]:
        """Send a batch from synchronous code; stored successes are not re-sent.
        ``follow_up``: see ``Gateway.run``."""
        return run_async(self.gateway.run(requests, progress, follow_up,
                                          self.reuse_failed_since))

    @contextlib.contextmanager
    def reusing_failures_since(self, since: datetime | None) -> Iterator[None]:
        """Within the block, failures recorded since ``since`` are served; a window an
        enclosing block opened earlier (a sharded run's replay) stays open."""
        before = self.reuse_failed_since
        if before is not None and (since is None or before < since):
            since = before
        self.reuse_failed_since = since
        try:
            yield
        finally:
            self.reuse_failed_since = before


def embedded_replica_count() -> int:
    """Servers of the embedded model to start: $ESSAYBENCH_EMBEDDED_REPLICAS, else one
    per CPU up to 2 (each runs one thread; more replicas than cores only contend)."""
    value = os.environ.get(REPLICAS_ENV, "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise UserError(f"{REPLICAS_ENV} must be a whole number ≥ 1, not {value!r}")
        return int(value)
    return max(1, min(2, os.cpu_count() or 1))


@contextlib.contextmanager
def open_gateway(
    registry: Registry,
    store_root: Path | str,
    models: Sequence[str],
    *,
    base_urls: Mapping[str, str | ReplicaPool] | None = None,
    backoff: Backoff | None = None,
    log_dir: Path | None = None,
    ledger_lock_timeout_s: float = 120.0,
    scope: ReuseScope = ANY_RUN,
    embedded_replicas: int | None = None,
    ledger: Ledger | None = None,
    batch_options: BatchOptions | None = None,
    batch_waiting: BatchWaiting = "poll",
    limits: LimiterFactory = local_limiter,
) -> Iterator[GatewaySession]:
    """``embedded_replicas``: servers of the embedded model, shared by every embedded
    entry (default ``embedded_replica_count()``). ``ledger``: where calls are recorded
    and looked up (default: the store's ledger file; a shard passes its ``PartLedger``).
    ``batch_options``: how entries with a batch API use it (default ``BatchOptions()``);
    ``batch_waiting``: how a run waits for their batches (``llm.batch.route``): poll until
    they end, or raise ``BatchesPending`` ("return"). ``limits``: how each entry's limiter
    is made (default: in this process; a shard's shared with the run's other shards,
    ``llm.shared_limits``). Calls go to ``base_urls`` where given, else where
    ``$ESSAYBENCH_ENDPOINTS`` sends them on this host (``llm.endpoints``), else to each
    entry's ``base_url``."""
    store_root = Path(store_root)
    if isinstance(ledger, PartLedger):
        refuse_in_shards(registry, models)
    with contextlib.ExitStack() as stack:
        ledger = stack.enter_context(
            ledger or Ledger(store_root / LEDGER_FILE, ledger_lock_timeout_s))
        # Where this host reaches each model ($ESSAYBENCH_ENDPOINTS, llm.endpoints); the
        # entry's base_url stays its name in request keys and records.
        urls: dict[str, str | ReplicaPool] = {**host_endpoints(registry, models),
                                              **(base_urls or {})}
        specs = dict(registry.models)
        pool: ReplicaPool | None = None
        for name in models:
            spec = registry.get(name)
            if not spec.is_embedded or name in urls:
                continue
            from essaybench.llm.embedded import EmbeddedServer, embedded_spec

            specs[name] = embedded_spec(spec)
            if pool is None:
                count = embedded_replicas or embedded_replica_count()
                servers = [EmbeddedServer(log_dir or store_root / "logs",
                                          model_alias=specs[name].model_id)
                           for _ in range(count)]
                for server in servers:  # stop() is a no-op for a server never started
                    stack.callback(server.stop)
                _start_all(servers)
                pool = ReplicaPool([server.base_url for server in servers])
            urls[name] = pool
        gateway = Gateway(Registry(models=specs), ledger, base_urls=urls, backoff=backoff,
                          scope=scope, limits=limits)
        BatchRoute.install(gateway, batch_options, batch_waiting)
        yield GatewaySession(gateway, ledger)


def _start_all(servers: Sequence[EmbeddedServer]) -> None:
    """Start the replicas at once: each loads the model (~3 s) on its own core."""
    if len(servers) == 1:
        servers[0].start()
        return
    with ThreadPoolExecutor(len(servers)) as pool:
        for future in [pool.submit(server.start) for server in servers]:
            future.result()  # the first start-up error, after every start has returned
