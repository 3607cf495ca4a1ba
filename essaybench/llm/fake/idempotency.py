"""Idempotency-Key, as a provider that honours it keeps it: the fake's record of answers.

A request carrying a key the fake has answered cleanly before, with the same body, is
answered from the record (``Idempotent-Replayed: true``) and not charged again; one whose
key is still being answered waits for that answer. The same key with another body is a
client bug (422). Only clean answers are kept: a fault, a dropped connection or an error
leaves the key free, so the retry is answered afresh. An answer is kept even when its
client hung up before the last byte (killed mid-call): that is the call a crashed worker
paid for and its re-sent shard must not pay for again.

Off unless the scenario says ``honour_idempotency_key: true``: OpenAI's chat completions
ignore the header, and the fake answers as they do by default.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

IDEMPOTENCY_HEADER = "idempotency-key"
REPLAYED_HEADER = "Idempotent-Replayed"


@dataclass(frozen=True)
class Stored:
    """A clean answer kept under its key: the request body's hash, the reply, the model."""

    body_key: str
    payload: bytes
    model: str


class KeyConflict(Exception):
    """The key was first used with another request body."""


class IdempotencyRecords:
    """Touched only on the server's event loop."""

    def __init__(self) -> None:
        self.done: dict[str, Stored] = {}
        self.running: dict[str, tuple[str, asyncio.Future[None]]] = {}

    async def claim(self, key: str, body_key: str) -> Stored | None:
        """The stored answer for ``key``, or None: the caller answers it now and must
        ``settle`` it. Waits while another request with the key is being answered.
        Raises ``KeyConflict`` for a key first used with another body."""
        while True:
            stored = self.done.get(key)
            if stored is not None:
                if stored.body_key != body_key:
                    raise KeyConflict(key)
                return stored
            running = self.running.get(key)
            if running is None:
                self.running[key] = (body_key, asyncio.get_running_loop().create_future())
                return None
            if running[0] != body_key:
                raise KeyConflict(key)
            await asyncio.shield(running[1])  # then look again: stored, or free to answer

    def settle(self, key: str, answer: Stored | None) -> None:
        """The claimed key's request is over; ``answer``: its clean reply, if it had one."""
        if answer is not None:
            self.done[key] = answer
        _, waiting = self.running.pop(key)
        if not waiting.done():
            waiting.set_result(None)
