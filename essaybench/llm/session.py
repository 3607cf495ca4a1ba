"""A gateway session: the ledger, the gateway, and the embedded server if a model needs it.

    with open_gateway(registry, store_root, ["smollm2-135m"], scope=scope) as session:
        results = session.run(requests)

``scope`` (a :class:`ReuseScope`) is the run the session's calls are recorded under and
the runs whose recorded calls it may serve; the default, ``ANY_RUN``, serves any
recorded call (a script, a test: nothing benchmark-like).

The embedded model's server is started only when a requested model is the embedded
one, on a free loopback port, and stopped when the session ends (also on errors and
Ctrl-C). Its registry entry is pinned to the GGUF file's hash so the ledger never
mixes two model files.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from essaybench.llm.batching import FollowUp
from essaybench.llm.gateway import Gateway, ProgressCallback, run_async
from essaybench.llm.ledger import Ledger
from essaybench.llm.registry import Registry
from essaybench.llm.retry import Backoff
from essaybench.llm.scope import ANY_RUN, ReuseScope
from essaybench.llm.types import ChatRequest, ChatResult

LEDGER_FILE = "ledger.duckdb"


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
        before, self.reuse_failed_since = self.reuse_failed_since, since
        try:
            yield
        finally:
            self.reuse_failed_since = before


@contextlib.contextmanager
def open_gateway(
    registry: Registry,
    store_root: Path | str,
    models: Sequence[str],
    *,
    base_urls: dict[str, str] | None = None,
    backoff: Backoff | None = None,
    log_dir: Path | None = None,
    ledger_lock_timeout_s: float = 120.0,
    scope: ReuseScope = ANY_RUN,
) -> Iterator[GatewaySession]:
    store_root = Path(store_root)
    with contextlib.ExitStack() as stack:
        ledger = stack.enter_context(Ledger(store_root / LEDGER_FILE, ledger_lock_timeout_s))
        urls = dict(base_urls or {})
        specs = dict(registry.models)
        server_url: str | None = None
        for name in models:
            spec = registry.get(name)
            if not spec.is_embedded or name in urls:
                continue
            from essaybench.llm.embedded import EmbeddedServer, embedded_spec

            specs[name] = embedded_spec(spec)
            if server_url is None:
                server = stack.enter_context(EmbeddedServer(
                    log_dir or store_root / "logs", model_alias=specs[name].model_id))
                server_url = server.base_url
            urls[name] = server_url
        gateway = Gateway(Registry(models=specs), ledger, base_urls=urls, backoff=backoff,
                          scope=scope)
        yield GatewaySession(gateway, ledger)
