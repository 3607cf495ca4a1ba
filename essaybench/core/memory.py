"""Give the memory a finished step freed back to the operating system.

CPython returns freed objects to its allocator, and glibc's malloc keeps freed pages in
its arenas: a long-lived process (a Prefect worker, ``essaybench run`` over several weeks,
the pipeline benchmark's three runs) would start each run at the previous one's peak.
``malloc_trim(0)`` releases the free pages (glibc only; elsewhere a no-op). It costs a
few milliseconds and frees nothing still in use.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import sys
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):  # musl and others have no malloc_trim
        return None
    return trim


def release_free_memory() -> bool:
    """Collect the cycles a finished step left (``core/gcfreeze``'s freeze would otherwise
    keep them alive through the next step), then return free heap pages to the system;
    whether the allocator could."""
    gc.collect()
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
