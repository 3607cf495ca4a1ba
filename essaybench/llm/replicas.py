"""Several servers of one model behind one registry entry, each call sent to one of them.

The embedded model runs one llama.cpp server per replica, each on one thread (on a
machine with two cores, two replicas do twice the work of one). A server reads a
prompt only from where it differs from what its cache holds, and a judgment's costly
part is its rubric, the same system message for every essay of a genre: reading it
costs ~40 s on one thread, judging a short essay after it ~10 s. So a call whose first
message is long (a rubric) has a home: the replica that first read it, where it waits
its turn rather than making a second replica read the rubric again. Any other call goes
to a replica with the fewest calls in flight and, among those, preferably to one that
last read the same first message; otherwise to the one free the longest.

The pool is shared by every entry served by the same replicas (e.g. two writer
configurations and a judge, all the embedded model), so the counts are the servers'
real load. It lives in one event loop; no locking is needed.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Sequence

from essaybench.llm.types import Message

# A first message at least this long (a rubric: ~3,000 characters) is worth a home replica;
# a writer's system prompt (a sentence) is not, and spreading its calls keeps both busy.
HOME_MIN_CHARS = 1000


def affinity_of(messages: Sequence[Message]) -> str:
    """What a replica's prompt cache is likely to hold of a call: its first message
    (``home:``-prefixed when it is long enough to keep to one replica)."""
    if not messages:
        return ""
    first = messages[0].content
    digest = hashlib.sha256(first.encode()).hexdigest()[:16]
    return f"home:{digest}" if len(first) >= HOME_MIN_CHARS else digest


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
        self._home: dict[str, int] = {}  # long first messages -> the replica that read them

    def __len__(self) -> int:
        return len(self.urls)

    def pick(self, affinity: str) -> int:
        if affinity in self._home:
            return self._home[affinity]
        i = self._least_busy(affinity)
        if affinity.startswith("home:"):
            self._home[affinity] = i
        return i

    def _least_busy(self, affinity: str) -> int:
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
