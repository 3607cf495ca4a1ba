"""One (model, stage)'s arithmetic: the essay length a prompt asks for and the time a
per-minute limit needs after its burst."""

from __future__ import annotations

import pytest

from essaybench.bench.estimate_calls import rate_bound
from essaybench.bench.estimate_text import requested_chars


@pytest.mark.parametrize(("text", "expected"), [
    ("写一篇600字左右的记叙文", 600.0), ("字数在500到700字之间", 600.0),
    ("不少于800字", 960.0), ("不超过400字", 400.0), ("写一篇作文", None)])
def test_requested_length(text: str, expected: float | None) -> None:
    assert requested_chars(text) == (None if expected is None else pytest.approx(expected))


def test_rate_bound_allows_the_burst() -> None:
    assert rate_bound(5, None) is None
    assert rate_bound(10, 60) == 0.0  # 10 s of 1/s: all in the burst
    assert rate_bound(70, 60) == pytest.approx(60.0)
