"""frozen_heap: freeze on the outermost entry, unfreeze on the last exit."""

from __future__ import annotations

import gc
import threading

from essaybench.core.gcfreeze import STEP_GEN0_THRESHOLD, collector_paused, frozen_heap


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


def test_a_step_collects_the_young_generation_less_often_and_restores_the_thresholds() -> None:
    before = gc.get_threshold()
    with frozen_heap():
        assert gc.get_threshold() == (max(before[0], STEP_GEN0_THRESHOLD), *before[1:])
        with frozen_heap():
            assert gc.get_threshold()[0] >= STEP_GEN0_THRESHOLD
        assert gc.get_threshold()[0] >= STEP_GEN0_THRESHOLD  # the outer step still runs
    assert gc.get_threshold() == before


def test_a_nested_step_freezes_what_the_steps_before_it_left() -> None:
    with frozen_heap():
        frozen = gc.get_freeze_count()
        left = [[i] for i in range(1000)]  # what an earlier step made and kept
        with frozen_heap():
            assert gc.get_freeze_count() >= frozen + len(left)
    assert gc.get_freeze_count() == 0
