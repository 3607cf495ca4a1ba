"""The streaming stages' memo of distinct texts: the same answers as computing every time,
bounded by entries and by the characters it holds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from essaybench.core.text_memo import TextMemo


def _memo(calls: list[str], **limits: int) -> TextMemo[str]:
    def compute(text: str) -> str:
        calls.append(text)
        return text.upper() * 2

    return TextMemo(compute, lambda text, value: len(text) + len(value), **limits)


def test_a_text_is_computed_once_while_the_memo_holds_it() -> None:
    calls: list[str] = []
    memo = _memo(calls)
    assert [memo(t) for t in ["ab", "c", "ab", "c"]] == ["ABAB", "CC", "ABAB", "CC"]
    assert calls == ["ab", "c"] and len(memo) == 2 and memo.chars == 6 + 3


def test_the_memo_is_bounded_by_the_characters_it_holds() -> None:
    calls: list[str] = []
    memo = _memo(calls, max_chars=10)
    memo("abc")  # 9 characters held
    memo("d")  # 3 more: over 10, so the memo starts again with "d" alone
    assert len(memo) == 1 and memo.chars == 3
    memo("abc")
    assert calls == ["abc", "d", "abc"]
    long = "x" * 20
    assert memo(long) == memo(long) == "X" * 40  # larger than the whole memo: never held
    assert calls[-2:] == [long, long] and memo.chars <= 10


def test_the_memo_is_bounded_by_its_entries() -> None:
    calls: list[str] = []
    memo = _memo(calls, max_entries=2)
    for t in ["a", "b", "c", "a"]:
        memo(t)
    assert len(memo) <= 2 and calls == ["a", "b", "c", "a"]


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(st.text(alphabet="ab写作", max_size=4), max_size=40),
       max_entries=st.integers(1, 5), max_chars=st.integers(1, 30))
def test_answers_equal_computing_every_time_within_both_bounds(
        texts: list[str], max_entries: int, max_chars: int) -> None:
    calls: list[str] = []
    memo = _memo(calls, max_entries=max_entries, max_chars=max_chars)
    for text in texts:
        assert memo(text) == text.upper() * 2
        assert len(memo) <= max_entries and memo.chars <= max_chars
