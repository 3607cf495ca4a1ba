from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from essaybench.curate.collect import run_collect
from essaybench.curate.funnel import FunnelImbalance, compute_funnel
from essaybench.sources.config import SourcesConfig, SourceSpec


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


def test_funnel_counts_the_physical_rows_of_a_broken_csv(tmp_path: Path) -> None:
    """Issue 13: a CSV of 50 rows with one unclosed quote balanced as 2 raw records (one
    kept, one csv_error); the funnel counts its 50 physical rows."""
    rows = [f"{i},以“门{i}”为题写一篇不少于八百字的记叙文,2024" for i in range(1, 51)]
    rows[9] = '10,"以“门”为题写一篇作文,2024'  # row 10 (line 11) opens a quote never closed
    (tmp_path / "exam.csv").write_text("id,prompt,year\n" + "\n".join(rows) + "\n",
                                       encoding="utf-8")
    sources = SourcesConfig(base_dir=tmp_path, sources=[SourceSpec(
        name="exam", kind="csv", path="exam.csv", text_column="prompt", id_column="id")])
    collected = run_collect(sources).table
    kept = collected.filter(pl.col("decision") == "kept").select("decision", "reason")
    tables = {"collect": collected.select("decision", "reason"),
              **dict.fromkeys(("filter", "dedup", "rouge", "classify"), kept)}
    f = compute_funnel(tables)
    assert (f.raw, f.quarantined, f.final) == (50, 41, 9)
    assert f.reasons["quarantined"] == {"unclosed_quote": 41}
    assert f.balanced
