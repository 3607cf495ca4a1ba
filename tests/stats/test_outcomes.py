"""Encoding pairwise outcomes into per-prompt, per-pair counts."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from essaybench.stats.outcomes import encode, split_ok

COLS = ["prompt_id", "model_a", "model_b", "verdict", "status"]


def _df(rows: list[tuple[object, ...]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=COLS, orient="row")


def test_orientation_is_normalised_and_failed_rows_counted() -> None:
    df = _df([("p1", "b", "a", "A", "ok"),    # b beat a → second of (a, b) wins
              ("p1", "a", "b", "A", "ok"),    # a wins
              ("p2", "a", "c", "tie", "ok"),
              ("p2", "c", "a", "B", "ok"),    # a wins
              ("p2", "a", "b", None, "api_error"),
              ("p3", "b", "c", "A", None)])   # null status is not ok
    enc = encode(df)
    assert enc.models == ("a", "b", "c") and enc.prompts == ("p1", "p2")
    assert enc.pairs.tolist() == [[0, 1], [0, 2]]
    assert enc.n_failed == 2
    np.testing.assert_array_equal(enc.counts[0], [[1, 1, 0], [0, 0, 0]])
    np.testing.assert_array_equal(enc.counts[1], [[0, 0, 0], [1, 0, 1]])
    record = enc.record()
    assert record["wins"].tolist() == [2, 1, 0]
    assert record["losses"].tolist() == [1, 1, 1]
    assert record["ties"].tolist() == [1, 0, 1]
    assert record["n"].tolist() == [4, 2, 2]


def test_missing_status_column_means_all_ok_and_model_list_checked() -> None:
    df = _df([("p", "a", "b", "B", "ok")]).drop("status")
    ok, failed = split_ok(df)
    assert (ok.height, failed) == (1, 0)
    assert encode(df, models=["c", "b", "a"]).models == ("a", "b", "c")
    with pytest.raises(ValueError, match="not in the model list"):
        encode(df, models=["a"])


@pytest.mark.parametrize(("row", "match"), [
    (("p", "a", "b", "win", "ok"), "verdict"),
    (("p", "a", "b", None, "ok"), "verdict"),
    (("p", "a", "a", "A", "ok"), "itself"),
    ((None, "a", "b", "A", "ok"), "null"),
])
def test_invalid_rows(row: tuple[object, ...], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        encode(_df([row]))
