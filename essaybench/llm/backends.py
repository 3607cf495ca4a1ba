"""Backend classes by protocol name: how the gateway talks to each registry entry.

A registry entry's ``protocol`` (``openai``, the default) names the class that sends its
calls. A new provider protocol is one class, registered under a new name, never an edit
of the gateway::

    from essaybench import ChatBackend, register_backend

    @register_backend("myproto")
    class MyBackend:
        def __init__(self, spec, base_url=None, *, limiter=None, backoff=None, seed=None):
            self.spec = spec
        async def complete(self, request, key=None, idempotency=None): ...
        async def aclose(self): ...

Installed packages can offer backends through the entry-point group
``essaybench.backends`` (``name = "package.module:Class"``); an entry point is loaded
only when a registry names a protocol no class was registered under (``llm.protocols``
keeps the names). The gateway looks
the class up once per model and batch (``Gateway.backend``), never per call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

from essaybench.llm.protocols import (
    ENTRY_POINT_GROUP,
    UnknownProtocolError,
    known_protocols,
    lookup,
    register,
)

if TYPE_CHECKING:
    from essaybench.llm.ratelimit import Limiter
    from essaybench.llm.registry import ModelSpec
    from essaybench.llm.replicas import ReplicaPool
    from essaybench.llm.retry import Backoff
    from essaybench.llm.types import ChatRequest, ChatResult

__all__ = ["ENTRY_POINT_GROUP", "BackendClass", "ChatBackend", "UnknownProtocolError",
           "backend_class", "known_protocols", "register_backend"]


class ChatBackend(Protocol):
    """Anything that can answer a chat request: the one interface the gateway calls.

    ``complete`` never raises for anything the provider does (an HTTP error, a refusal,
    an invalid reply): every outcome is a ``ChatResult`` with a status. Retries and
    re-asks happen inside it, so the ledger records one logical call.
    """

    spec: ModelSpec

    async def complete(self, request: ChatRequest, key: str | None = None,
                       idempotency: str | None = None) -> ChatResult:
        """Answer ``request``; ``key`` is its ``request_key`` when the caller already has it;
        ``idempotency``: the call's idempotency token (``idempotency_token``), or None."""
        ...

    async def aclose(self) -> None:
        """Release connections; the gateway calls it when its batch ends."""
        ...


class BackendClass(Protocol):
    """How the gateway makes a backend: the registry entry, the URL to dial (the
    started embedded server's, a test server's, or several replicas; None: the entry's
    ``base_url``), the entry's rate limiter, the retry backoff and a seed for jitter."""

    def __call__(self, spec: ModelSpec, base_url: str | ReplicaPool | None = None, *,
                 limiter: Limiter | None = None, backoff: Backoff | None = None,
                 seed: int | None = None) -> ChatBackend: ...


C = TypeVar("C", bound=Callable[..., object])


def register_backend(name: str) -> Callable[[C], C]:
    """Class decorator: registry entries with ``protocol: <name>`` are sent through the
    decorated class (see ``BackendClass`` for its constructor, ``ChatBackend`` for its
    methods). Registering a name again replaces the class.

    Args:
        name: The protocol name a registry entry's ``protocol`` field gives (letters,
            digits, '-' and '_').

    Returns:
        The decorator, which returns the class unchanged.
    """
    if not name or not name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"backend protocol names are letters, digits, '-' and '_': {name!r}")

    def decorate(cls: C) -> C:
        register(name, cls)
        return cls

    return decorate


def backend_class(name: str) -> BackendClass:
    """The class registered under protocol ``name`` (``UnknownProtocolError`` if none)."""
    return cast("BackendClass", lookup(name))
