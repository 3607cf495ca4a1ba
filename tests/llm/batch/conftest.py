"""Batch mode against the real fake server on 127.0.0.1: helpers shared by the tests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from essaybench.llm.batch import BatchOptions, BatchRunner
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.llm.gateway import Gateway
from essaybench.llm.ledger import Ledger
from essaybench.llm.retry import Backoff
from essaybench.llm.scope import ReuseScope
from essaybench.llm.types import ChatRequest, ChatResult, Message
from tests.llm.conftest import fake_spec, registry_of

SCHEMA = {"type": "object", "additionalProperties": False,
          "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 10},
                         "reason": {"type": "string", "maxLength": 20}},
          "required": ["score", "reason"]}
FAST = BatchOptions(poll_initial_s=0.02, poll_max_s=0.1)


def requests(n: int, model: str = "w", schema: bool = False,
             prefix: str = "写一篇作文") -> list[ChatRequest]:
    return [ChatRequest(model=model, messages=(Message(role="system", content="你是作文老师。"),
                                               Message(role="user", content=f"{prefix}{i}")),
                        response_schema=SCHEMA if schema else None, stage="generate",
                        tag=f"p{i}") for i in range(n)]


def gateway(fake: FakeServerHandle, ledger: Ledger, batch: str = "openai",
            run_id: str | None = "run-1", **spec: Any) -> Gateway:
    fields: dict[str, Any] = {"batch": batch, "batch_price_factor": 0.5, **spec}
    reg = registry_of(fake_spec("w", **fields))
    scope = ReuseScope.of_run(run_id) if run_id else ReuseScope()
    return Gateway(reg, ledger, base_urls={"w": fake.base_url},
                   backoff=Backoff(base_s=0.01, cap_s=0.05), scope=scope)


def run_batch(fake: FakeServerHandle, path: Path, reqs: list[ChatRequest],
              options: BatchOptions = FAST, **spec: Any) -> list[ChatResult]:
    with Ledger(path, linger_s=0) as ledger:
        runner = BatchRunner(gateway(fake, ledger, **spec), options)
        return asyncio.run(runner.run(reqs))


def run_direct(fake: FakeServerHandle, path: Path, reqs: list[ChatRequest],
               **spec: Any) -> list[ChatResult]:
    with Ledger(path, linger_s=0) as ledger:
        return asyncio.run(gateway(fake, ledger, **spec).run(reqs))


@pytest.fixture
def serve() -> Iterator[Any]:
    """serve(batch={...}, **scenario) -> a running fake; stopped at the end."""
    with ExitStack() as stack:
        def start(batch: dict[str, Any] | None = None, **scenario: Any) -> FakeServerHandle:
            sc = FakeScenario.model_validate({"batch": batch or {}, **scenario})
            return stack.enter_context(run_fake_server(sc))
        yield start
