"""Several servers of one model behind one registry entry, each call sent to one of them.

The embedded model runs one llama.cpp server per replica, each on one thread (on a
machine with two cores, two replicas do twice the work of one). A server reads a
prompt only from where it differs from what its cache holds, and a judgment's costly
part is its rubric, the same system message for every essay of a genre. So a call goes
to a replica with the fewest calls in flight and, among those, preferably to one that
last read the same first message (its prompt cache holds it); otherwise to the one that
has been free the longest.

The pool is shared by every entry served by the same replicas (e.g. two writer
configurations and a judge, all the embedded model), so the counts are the servers'
real load. It lives in one event loop; no locking is needed.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Sequence

from essaybench.llm.types import Message


def affinity_of(messages: Sequence[Message]) -> str:
    """What a replica's prompt cache is likely to hold of a call: its first message."""
    return hashlib.sha256(messages[0].content.encode()).hexdigest()[:16] if messages else ""


class ReplicaPool:
    """Base URLs of equivalent servers; ``lease`` picks one for a call."""

    def __init__(self, base_urls: Sequence[str]) -> None:
        if not base_urls:
            raise ValueError("a replica pool needs at least one base URL")
        self.urls = [url.rstrip("/") for url in base_urls]
        self._busy = [0] * len(self.urls)
        self._last: list[str | None] = [None] * len(self.urls)
        self._released = [0] * len(self.urls)  # lease counter when each last became free
        self._leases = 0

    def __len__(self) -> int:
        return len(self.urls)

    def pick(self, affinity: str) -> int:
        least = min(self._busy)
        free = [i for i, busy in enumerate(self._busy) if busy == least]
        warm = [i for i in free if self._last[i] == affinity]
        if warm:
            return warm[0]
        return min(free, key=lambda i: self._released[i])

    @contextlib.contextmanager
    def lease(self, affinity: str) -> Iterator[str]:
        """The base URL of the replica chosen for one HTTP request, held while it runs."""
        i = self.pick(affinity)
        self._busy[i] += 1
        self._last[i] = affinity
        self._leases += 1
        try:
            yield self.urls[i]
        finally:
            self._busy[i] -= 1
            self._released[i] = self._leases

    def busy(self) -> list[int]:
        return list(self._busy)
