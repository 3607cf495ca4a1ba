"""release_free_memory gives freed heap pages back: the resident size falls after a
large freed allocation that malloc could not return by itself (a live block above it)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from essaybench.core.memory import release_free_memory


def resident_mib() -> float:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * 4096 / 2**20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc_trim")
def test_freed_pages_go_back_to_the_system() -> None:
    release_free_memory()
    blocks = [bytearray(4000) for _ in range(50_000)]  # ~200 MiB through malloc
    keep = bytearray(4000)  # a live block above them: free() cannot shrink the heap
    del blocks
    before = resident_mib()
    assert release_free_memory() is True
    after = resident_mib()
    assert before - after > 100, (before, after)
    assert keep
