"""Outcomes remembered per distinct text, all forgotten at once past a size.

A chat log asks the same things again and again (greetings, repeated prompts, a
conversation's earlier turns), so the curation stages that stream (collect, filter) decide
each distinct text once. The memo is bounded twice: by its number of entries and by the
characters its keys and values hold, so a log of long prompts costs no more memory than a
log of short ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")

MAX_ENTRIES = 100_000
MAX_CHARS = 32_000_000  # ~64-128 MiB of str (2 bytes a CJK character, 4 past the BMP)


class TextMemo(Generic[V]):
    """``compute(text)`` once per distinct text until the memo is full, then again."""

    def __init__(self, compute: Callable[[str], V], chars: Callable[[str, V], int], *,
                 max_entries: int | None = None, max_chars: int | None = None) -> None:
        self._compute = compute
        self._chars = chars  # the characters an entry holds: its key's and its value's
        # the module's limits, read now (a test lowers them)
        self._max_entries = MAX_ENTRIES if max_entries is None else max_entries
        self._max_chars = MAX_CHARS if max_chars is None else max_chars
        self._held: dict[str, V] = {}
        self._held_chars = 0

    def __call__(self, text: str) -> V:
        found = self._held.get(text)
        if found is None:
            found = self._compute(text)
            size = self._chars(text, found)
            if (len(self._held) >= self._max_entries
                    or self._held_chars + size > self._max_chars):
                self._held.clear()
                self._held_chars = 0
            if size <= self._max_chars:
                self._held[text] = found
                self._held_chars += size
        return found

    def __len__(self) -> int:
        return len(self._held)

    @property
    def chars(self) -> int:
        return self._held_chars
