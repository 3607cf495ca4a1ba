"""How flagged judgments count in the leaderboard: each rule on a hand-made table."""

from __future__ import annotations

import polars as pl
import pytest

from essaybench.bench.aggregate import table5
from essaybench.bench.flagged_rule import (
    mark,
    ranked_judgments,
    second_opinion_table,
)

# m1: one clean (60), one flagged obeyed (100, second 40), one flagged whose first
# judgment failed (second 30), one flagged whose second opinion failed (90).
TABLE = pl.DataFrame({
    "judge": ["j"] * 5, "model": ["m1"] * 4 + ["m2"],
    "prompt_id": ["p1", "p2", "p3", "p4", "p1"], "sample_index": [0] * 5,
    "genre": ["narrative"] * 5, "prompt_set": ["open"] * 5,
    "status": ["ok", "ok", "parse_error", "ok", "ok"],
    "score_weighted": [60.0, 100.0, None, 90.0, 70.0],
    "essay_flags": ["[]", '["instruction"]', '["instruction"]', "[]", "[]"],
    "judgment_flags": ["[]", '["all_max"]', "[]", '["outlier_high"]', "[]"],
    "second_judge": [None, "k", "k", "k", None],
    "second_status": [None, "ok", "ok", "api_error", None],
    "second_score": [None, 40.0, 30.0, None, None],
})


def _overall(table: pl.DataFrame, model: str) -> tuple[object, float]:
    # object, not float | None: it is compared with pytest.approx(...), which mypy's strict
    # equality would take for a type that never equals a float.
    row = table5(table).filter(pl.col("model") == model).row(0, named=True)
    return row["overall"], row["overall:coverage"]


def test_second_opinion() -> None:
    ranked = ranked_judgments(TABLE, "second_opinion")
    assert ranked["ranked_on"].to_list() == [None, "second_opinion", "second_opinion",
                                             "first_judge", None]
    assert _overall(ranked, "m1") == (pytest.approx((60 + 40 + 30 + 90) / 4), 1.0)
    assert TABLE["score_weighted"][1] == 100.0  # the stored judgments are not changed


def test_exclude() -> None:
    ranked = ranked_judgments(TABLE, "exclude")
    assert _overall(ranked, "m1") == (60.0, 0.25)  # the rest stay rows: coverage shows it


def test_first_judge() -> None:
    ranked = ranked_judgments(TABLE, "first_judge")
    assert _overall(ranked, "m1") == (pytest.approx((60 + 100 + 90) / 3), 0.75)


def test_the_second_opinion_table() -> None:
    [row] = second_opinion_table(TABLE, "second_opinion").to_dicts()
    assert row == {"judge": "j", "model": "m1", "rule": "second_opinion", "judged": 4,
                   "flagged": 3, "second_asked": 3, "second_ok": 2, "first_mean": 100.0,
                   "second_mean": 40.0, "mean_second_minus_first": -60.0,
                   "ranked_on_second": 2, "kept_first": 1, "excluded": 0,
                   "second_judge": "k"}
    assert mark(row) == ("3 flagged, 2 ranked on the second opinion (k), 1 on the first "
                         "judge's score")


def test_a_table_without_flags_is_ranked_as_it_is() -> None:
    bare = TABLE.drop("essay_flags", "judgment_flags", "second_judge", "second_status",
                      "second_score")
    assert ranked_judgments(bare, "second_opinion")["score_weighted"].equals(
        bare["score_weighted"])
    assert second_opinion_table(bare, "exclude").height == 0
