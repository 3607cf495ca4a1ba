"""frozen_heap: freeze on the outermost entry, unfreeze on the last exit."""

from __future__ import annotations

import gc
import threading

from essaybench.core.gcfreeze import collector_paused, frozen_heap


def test_nested_and_threaded_uses_unfreeze_once_all_have_ended() -> None:
    assert gc.get_freeze_count() == 0
    inside = threading.Event()
    leave = threading.Event()
    seen: list[int] = []

    def worker() -> None:
        with frozen_heap():
            inside.set()
            leave.wait(5)
            seen.append(gc.get_freeze_count())

    thread = threading.Thread(target=worker)
    with frozen_heap():
        with frozen_heap():
            assert gc.get_freeze_count() > 0
        thread.start()
        inside.wait(5)
    assert gc.get_freeze_count() > 0  # the thread's use is still running
    leave.set()
    thread.join(5)
    assert seen and seen[0] > 0
    assert gc.get_freeze_count() == 0


def test_an_error_inside_still_unfreezes() -> None:
    try:
        with frozen_heap():
            raise KeyError("x")
    except KeyError:
        pass
    assert gc.get_freeze_count() == 0


def test_the_collector_is_paused_until_the_last_use_ends_then_restored() -> None:
    assert gc.isenabled()
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    try:
        with collector_paused():
            raise KeyError("x")
    except KeyError:
        pass
    assert gc.isenabled()


def test_a_collector_the_caller_had_disabled_stays_disabled() -> None:
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
