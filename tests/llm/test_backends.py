"""Backend classes by protocol (llm.backends): a registry entry's ``protocol`` chooses the
class the gateway sends its calls through; a new protocol is one registered class."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from essaybench.core.errors import user_error_of
from essaybench.llm.backends import backend_class, known_protocols, register_backend
from essaybench.llm.client import OpenAICompatBackend
from essaybench.llm.gateway import Gateway
from essaybench.llm.ledger import Ledger
from essaybench.llm.registry import ModelSpec, RegistryError, load_registry
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message


@register_backend("echo-test")
class EchoBackend:
    """Answers every request with its last message reversed, and counts itself."""

    made: ClassVar[list[str]] = []

    def __init__(self, spec: ModelSpec, base_url: Any = None, **_: Any) -> None:
        self.spec = spec
        EchoBackend.made.append(spec.name)

    async def complete(self, request: ChatRequest, key: str | None = None,
                       idempotency: str | None = None) -> ChatResult:
        now = datetime.now(UTC)
        return ChatResult(key=key or "", model=request.model, status=CallStatus.OK,
                          text=request.messages[-1].content[::-1], attempts=1,
                          returned_model=self.spec.model_id, started_at=now, finished_at=now)

    async def aclose(self) -> None:
        return None


def _registry_file(tmp_path: Path, **protocols: str) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"models": {
        name: {"provider": "p", "base_url": f"http://127.0.0.1:9/{name}/v1", "model_id": name,
               "family": "fam", "protocol": protocol}
        for name, protocol in protocols.items()}}), encoding="utf-8")
    return path


def test_the_default_protocol_is_openai() -> None:
    assert backend_class("openai") is OpenAICompatBackend
    spec = ModelSpec(name="m", provider="p", base_url="http://h/v1", model_id="x",
                     family="f")
    assert spec.protocol == "openai"
    assert {"openai", "echo-test"} <= set(known_protocols())


def test_a_registered_backend_sends_the_calls_of_the_entries_naming_it(
        tmp_path: Path) -> None:
    registry = load_registry(_registry_file(tmp_path, echo="echo-test", http="openai"))
    requests = [ChatRequest(model="echo", messages=(Message(role="user", content=f"题{i}"),))
                for i in range(5)]
    EchoBackend.made.clear()

    async def main() -> list[ChatResult]:
        with Ledger(tmp_path / "ledger.duckdb") as ledger:
            gateway = Gateway(registry, ledger)
            assert isinstance(gateway.backend("http"), OpenAICompatBackend)
            return await gateway.run(requests)

    results = asyncio.run(main())
    assert [r.text for r in results] == [f"{i}题" for i in range(5)]
    assert all(r.ok for r in results)
    assert EchoBackend.made == ["echo"]  # chosen once for the model, not per call


def test_an_unknown_protocol_is_one_line_naming_the_file_and_the_entry(
        tmp_path: Path) -> None:
    path = _registry_file(tmp_path, good="openai", bad="grpc-chat")
    with pytest.raises(RegistryError) as exc:
        load_registry(path)
    msg = str(exc.value)
    line = path.read_text(encoding="utf-8").splitlines().index("    protocol: grpc-chat") + 1
    assert msg.startswith(f"{path}:{line}: model registry: models.bad.protocol: ")
    assert "unknown protocol 'grpc-chat'" in msg and "openai" in msg and "\n" not in msg
    assert user_error_of(exc.value) is not None  # the command line's one line, exit 2


def test_protocol_names_are_checked_when_registered() -> None:
    with pytest.raises(ValueError, match="protocol names"):
        register_backend("no spaces")
