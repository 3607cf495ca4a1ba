"""``essay_lengths``: the Chinese-character count the score–length slope and the
length-controlled ranking read, counted by polars over the whole column, equals
``count_chinese_chars`` (Python's re) essay by essay, edges of every range included."""

from __future__ import annotations

import random

import polars as pl

from essaybench.bench.stats_tables import essay_lengths
from essaybench.constraints.counting import _IDEOGRAPH_RANGES, count_chinese_chars


def test_the_column_count_equals_the_per_essay_count_at_every_range_edge() -> None:
    edges = [chr(c) for lo, hi in _IDEOGRAPH_RANGES for c in (lo - 1, lo, hi, hi + 1)]
    pool = [*edges, *"，。！？「」abcXYZ 0129\n\t", *map(chr, range(0x4E00, 0x4E40))]
    rng = random.Random(7)
    texts: list[str | None] = ["".join(rng.choices(pool, k=rng.randint(0, 300)))
                               for _ in range(400)]
    texts += [None, "", "".join(edges)]
    essays = pl.DataFrame({"essay_text": texts, "off_language": [False] * len(texts)},
                          schema={"essay_text": pl.Utf8, "off_language": pl.Boolean})
    expected = [None if t is None else count_chinese_chars(t) for t in texts]
    assert essay_lengths(essays) == expected
    assert expected[-1] is not None
    assert 0 < expected[-1] < len(edges)  # the edges hold characters on both sides


def test_off_language_and_failed_essays_have_no_length() -> None:
    essays = pl.DataFrame({"essay_text": ["我们的学校很美丽", "An English essay 中", None],
                           "off_language": [False, True, None]})
    assert essay_lengths(essays) == [8, None, None]
