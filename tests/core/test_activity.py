"""What the process works on now (``core.activity``): the stage a progress display names."""

from __future__ import annotations

import threading

from essaybench.core.activity import Doing, current, doing, set_listener


def test_the_innermost_running_stretch_is_current_and_the_listener_hears_each_start() -> None:
    heard: list[str] = []
    before = set_listener(lambda d: heard.append(d.name))
    try:
        assert current() is None
        with doing("generate"):
            assert current() is not None and current().name == "generate"  # type: ignore[union-attr]
            with doing("judge") as judge:
                assert current() is judge
            assert current().name == "generate"  # type: ignore[union-attr]
        assert current() is None
        assert heard == ["generate", "judge"]
    finally:
        set_listener(before)


def test_a_listener_that_raises_never_breaks_the_stage() -> None:
    def broken(_: Doing) -> None:
        raise RuntimeError("display gone")

    before = set_listener(broken)
    try:
        with doing("aggregate"):
            assert current().name == "aggregate"  # type: ignore[union-attr]
    finally:
        set_listener(before)
    assert current() is None


def test_stretches_of_two_threads_end_apart() -> None:
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with doing("pairwise"):
            inside.set()
            release.wait(5)

    thread = threading.Thread(target=other)
    with doing("stats"):
        thread.start()
        inside.wait(5)
        assert current().name == "pairwise"  # type: ignore[union-attr]
    assert current().name == "pairwise"  # type: ignore[union-attr]  # stats ended, not it
    release.set()
    thread.join()
    assert current() is None
