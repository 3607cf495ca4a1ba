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

Which call goes next matters too: a gateway worker that took the next rubric call in
queue order would wait at that rubric's home while the other replica idled (both judge
workers on one rubric's calls: measured, half the demo's judging throughput). So a worker
takes the first queued call that would not wait (``would_wait``) and ``reserve``s its
home from then until the call ends, so the next worker sees that replica taken.

A replica that refuses connections (its server died) is set aside (``mark_down``): the
homes it held move, and no call is sent to it while another replica is up; the call's
retry goes elsewhere instead of failing at the dead home every time.
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
        self._reserved = [0] * len(self.urls)  # home calls taken by a worker, not yet done
        self._down: set[int] = set()  # replicas that refused a connection

    def __len__(self) -> int:
        return len(self.urls)

    def mark_down(self, url: str) -> None:
        """``url``'s server refused a connection: send nothing more there while another
        replica is up, and let the homes it held move to the replicas that are."""
        i = self.urls.index(url.rstrip("/"))
        self._down.add(i)
        self._home = {a: h for a, h in self._home.items() if h != i}

    def down(self) -> list[str]:
        return [self.urls[i] for i in sorted(self._down)]

    def pick(self, affinity: str) -> int:
        if affinity in self._home:
            return self._home[affinity]
        if not affinity.startswith("home:"):
            return self._least_busy(affinity, self._up())
        # A new rubric's home: a replica holding the fewest rubrics, so two rubrics are
        # read on two replicas, never queued at one while the other idles (which the
        # least busy replica alone gave when the other was writing an essay at the time).
        homes = [0] * len(self.urls)
        for home in self._home.values():
            homes[home] += 1
        up = self._up()
        fewest = min(homes[i] for i in up)
        i = self._least_busy(affinity, [i for i in up if homes[i] == fewest])
        self._home[affinity] = i
        return i

    def _up(self) -> list[int]:
        # every replica down: try them all (the calls then fail, and say why)
        return [i for i in range(len(self.urls)) if i not in self._down] or \
            list(range(len(self.urls)))

    def _least_busy(self, affinity: str, up: list[int]) -> int:
        # a reserved home call counts before it leases (two rubrics taken at once get
        # two replicas), and while it runs counts twice: it is the longer kind of call
        load = [b + r for b, r in zip(self._busy, self._reserved, strict=True)]
        least = min(load[i] for i in up)
        free = [i for i in up if load[i] == least]
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

    def would_wait(self, affinity: str) -> bool:
        """Whether a call of ``affinity`` would wait at its home replica: it has one, and
        a call is in flight there or reserved for it. Other calls go to the least busy."""
        home = self._home.get(affinity)
        return home is not None and (self._busy[home] > 0 or self._reserved[home] > 0)

    @contextlib.contextmanager
    def reserve(self, affinity: str) -> Iterator[None]:
        """Mark a home call's replica taken, from when a worker takes the call until it
        ends (its requests lease the replica in between). No-op for other calls."""
        if not affinity.startswith("home:"):
            yield
            return
        i = self.pick(affinity)  # the home it has, or the one it gets now
        self._reserved[i] += 1
        try:
            yield
        finally:
            self._reserved[i] -= 1
