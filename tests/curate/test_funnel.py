from __future__ import annotations

import polars as pl
import pytest

from essaybench.curate.funnel import FunnelImbalance, compute_funnel


def _t(decisions: list[tuple[str, str | None]]) -> pl.DataFrame:
    return pl.DataFrame({"decision": [d for d, _ in decisions],
                         "reason": [r for _, r in decisions]},
                        schema={"decision": pl.Utf8, "reason": pl.Utf8})


def _tables() -> dict[str, pl.DataFrame]:
    return {
        "collect": _t([("kept", None)] * 9 + [("quarantined", "invalid_json")] * 2),
        "filter": _t([("kept", None)] * 6 + [("filtered", "too_short"),
                                             ("filtered", "not_essay:code"),
                                             ("filtered", "too_short")]),
        "dedup": _t([("kept", None)] * 4 + [("duplicate", "exact_duplicate"),
                                            ("duplicate", "near_duplicate")]),
        "rouge": _t([("kept", None)] * 3 + [("duplicate", "rouge_l")]),
        "classify": _t([("kept", None)] * 2 + [("unclassified", "genre_undecided")]),
    }


def test_funnel_balances_and_counts_each_step() -> None:
    f = compute_funnel(_tables())
    assert (f.raw, f.quarantined, f.filtered, f.exact_duplicates, f.near_duplicates,
            f.rouge_duplicates, f.unclassified, f.final) == (11, 2, 3, 1, 1, 1, 1, 2)
    assert f.balanced and f.duplicates == 3
    assert f.reasons["filtered"] == {"not_essay:code": 1, "too_short": 2}
    assert [s[2] for s in f.steps()] == [11, 9, 6, 4, 3, 2]
    assert f.to_dict()["balanced"] is True


def test_funnel_detects_lost_rows() -> None:
    tables = _tables()
    tables["rouge"] = tables["rouge"].head(3)  # a stage silently dropped a row
    with pytest.raises(FunnelImbalance, match="rouge saw 3 rows but dedup kept 4"):
        compute_funnel(tables)


def test_funnel_detects_an_unaccounted_decision() -> None:
    tables = _tables()
    tables["filter"] = _t([("kept", None)] * 6 + [("duplicate", "x")] * 3)
    with pytest.raises(FunnelImbalance, match="does not balance"):
        compute_funnel(tables)
