"""The judge requests the generate stage's prefetch built, found again by the judge stage.

The prefetch (:mod:`.prefetch`) renders each ok essay's judge calls while the others are
still being written; the judge stage then builds the same calls to find their results
(the gateway keys them by content). At the paper's scale that is ~10k prompts rendered a
second time (0.3 s after the last call, when nothing else can overlap it). The memo
hands the prefetch's requests over instead, keyed by everything they are built from: the
settings' scope (:func:`memo_scope`: the judge parameters, the rubric's and the judge
prompt's fingerprints) and the essay's own fields. Equal keys, equal requests: a key is
never a guess. The gateway holds the same request objects until the judge stage takes
their results, so the memo costs no memory of its own beyond its keys.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

from essaybench.core.hashing import content_hash
from essaybench.llm.types import ChatRequest, ChatResult

T = TypeVar("T")

MemoKey = tuple[str, str, str, int, str, str, str]
# A generate stage whose judge stage never comes (a crash between them) leaves its
# requests here; past this many the memo starts again rather than grow.
MAX_ESSAYS = 65_536
MAX_READS = 4 * MAX_ESSAYS  # judges × repeats per essay


def memo_scope(params_json: str, rubric_fingerprint: str,
               judge_prompt_fingerprint: str | None) -> str:
    """What every request of a judge stage is built from besides the essay."""
    return content_hash([params_json, rubric_fingerprint, judge_prompt_fingerprint], 32)


def essay_key(scope: str, essay: Mapping[str, Any]) -> MemoKey:
    """``essay`` (a row of the essays table) as the memo knows it."""
    return (scope, str(essay["prompt_id"]), str(essay["model"]), int(essay["sample_index"]),
            str(essay["genre"]), str(essay["prompt_text"]), str(essay["essay_text"]))


class RequestMemo:
    """Essay → its judge requests, from the prefetch to the judge stage of one process."""

    def __init__(self, max_essays: int = MAX_ESSAYS) -> None:
        self.max_essays = max_essays
        self._built: dict[MemoKey, tuple[ChatRequest, ...]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._built)

    def remember(self, scope: str, essay: Mapping[str, Any],
                 requests: Sequence[ChatRequest]) -> None:
        key = essay_key(scope, essay)
        with self._lock:
            if len(self._built) >= self.max_essays:
                self._built.clear()
            self._built[key] = tuple(requests)

    def take(self, scope: str, essay: Mapping[str, Any]) -> list[ChatRequest] | None:
        """The requests remembered for ``essay`` under ``scope`` (handed over once), or
        None: build them."""
        key = essay_key(scope, essay)
        with self._lock:
            found = self._built.pop(key, None)
        return None if found is None else list(found)

    def forget(self) -> None:
        with self._lock:
            self._built.clear()


# The process's: the prefetch remembers, the judge stage takes and then forgets the rest.
PREFETCHED = RequestMemo()


class ReadMemo(Generic[T]):
    """A judge result → what reading it gave, from the prefetch (which reads each result
    as it comes back, while essays are still being written) to the judge stage. Found
    only for the very result object the gateway handed over (the judge stage gets the
    prefetch's results in memory) read under the same settings (scope), genre and
    expected nonce."""

    def __init__(self, max_reads: int = MAX_READS) -> None:
        self.max_reads = max_reads
        self._reads: dict[tuple[str, str, str, str | None], tuple[ChatResult, T]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._reads)

    def remember(self, scope: str, genre: str, nonce: str | None, result: ChatResult,
                 read: T) -> None:
        with self._lock:
            if len(self._reads) >= self.max_reads:
                self._reads.clear()
            self._reads[(scope, result.key, genre, nonce)] = (result, read)

    def take(self, scope: str, genre: str, nonce: str | None, result: ChatResult) -> T | None:
        key = (scope, result.key, genre, nonce)
        with self._lock:
            found = self._reads.get(key)
            if found is None or found[0] is not result:
                return None
            del self._reads[key]
        return found[1]

    def forget(self) -> None:
        with self._lock:
            self._reads.clear()
