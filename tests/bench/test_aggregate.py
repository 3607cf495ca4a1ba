"""Benchmark tables from hand-made judgments tables; every expected number is worked by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from essaybench.bench.aggregate import export, table5, to_markdown, trait_means
from essaybench.bench.judge.judgments import JUDGMENT_SCHEMA
from essaybench.core.contracts import cells


def row(judge: str, model: str, genre: str, prompt_set: str, status: str,
        score: float | None = None, traits: dict[str, int] | None = None) -> dict[str, Any]:
    base: dict[str, Any] = dict.fromkeys(JUDGMENT_SCHEMA)
    return {**base, "prompt_id": f"{genre}-{prompt_set}", "judge": judge, "model": model,
            "genre": genre, "prompt_set": prompt_set, "status": status, "sample_index": 0,
            "score_weighted": score, "score_unweighted": None if score is None else score / 2,
            "trait_scores": None if traits is None else json.dumps(traits)}


@pytest.fixture
def judgments() -> pl.DataFrame:
    rows = [
        # judge J, model A
        row("J", "A", "argumentative", "open", "ok", 80.0, {"t1": 10, "t2": 20}),
        row("J", "A", "argumentative", "open", "ok", 60.0, {"t1": 20, "t2": 30}),
        # A failed row that (unrealistically) carries traits: must still be ignored.
        row("J", "A", "argumentative", "open", "parse_error", None, {"t1": 99, "t2": 99}),
        row("J", "A", "argumentative", "constrained", "ok", 50.0, {"t1": 30, "t2": 40}),
        row("J", "A", "narrative", "open", "api_error"),
        row("J", "A", "narrative", "open", "skipped"),
        # judge J, model B (no argumentative/constrained rows at all)
        row("J", "B", "argumentative", "open", "ok", 90.0, {"t1": 5, "t2": 6}),
        row("J", "B", "narrative", "open", "ok", 70.0, {"n1": 8}),
        # judge K, model A
        row("K", "A", "argumentative", "open", "ok", 40.0, {"t1": 1, "t2": 2}),
    ]
    return pl.DataFrame(rows, schema=JUDGMENT_SCHEMA, orient="row")


def by_key(df: pl.DataFrame, judge: str, model: str) -> dict[str, Any]:
    return df.filter((pl.col("judge") == judge) & (pl.col("model") == model)).row(0, named=True)


def test_cells_follow_paper_order(judgments: pl.DataFrame) -> None:
    assert cells(judgments) == ["argumentative/open", "argumentative/constrained",
                                "narrative/open"]


def test_table5_means_and_coverage(judgments: pl.DataFrame) -> None:
    t = table5(judgments)
    a = by_key(t, "J", "A")
    # overall: ok scores 80, 60, 50 → 190/3; 3 ok of 6 rows → coverage 0.5
    assert a["overall"] == pytest.approx(190 / 3)
    assert (a["overall:coverage"], a["overall:n"], a["overall:rows"]) == (0.5, 3, 6)
    # argumentative/open: (80 + 60) / 2 = 70; 2 ok of 3 rows (one parse_error)
    assert a["argumentative/open"] == pytest.approx(70.0)
    assert a["argumentative/open:coverage"] == pytest.approx(2 / 3)
    assert a["argumentative/open:n"] == 2
    # argumentative/constrained: single ok row 50
    assert (a["argumentative/constrained"], a["argumentative/constrained:coverage"]) == (50.0, 1.0)
    # narrative/open: api_error + skipped → null mean (not 0.0), coverage 0, n 0
    assert a["narrative/open"] is None
    assert a["narrative/open:coverage"] == 0.0
    assert (a["narrative/open:n"], a["narrative/open:rows"]) == (0, 2)

    b = by_key(t, "J", "B")
    # overall: (90 + 70) / 2 = 80, all ok
    assert (b["overall"], b["overall:coverage"], b["overall:n"]) == (80.0, 1.0, 2)
    # no rows at all in this cell: nothing attempted → null mean and null coverage
    assert b["argumentative/constrained"] is None
    assert b["argumentative/constrained:coverage"] is None
    assert b["argumentative/constrained:n"] == 0

    k = by_key(t, "K", "A")
    assert (k["overall"], k["overall:coverage"]) == (40.0, 1.0)
    assert k["narrative/open:rows"] == 0


def test_table5_other_score_column(judgments: pl.DataFrame) -> None:
    a = by_key(table5(judgments, score="score_unweighted"), "J", "A")
    # unweighted = weighted / 2 in the fixture: (40 + 30) / 2 = 35
    assert a["argumentative/open"] == pytest.approx(35.0)


def test_table5_ordering(judgments: pl.DataFrame) -> None:
    t = table5(judgments)
    # judge J: B (80) before A (63.33); then judge K
    assert t.select("judge", "model").rows() == [("J", "B"), ("J", "A"), ("K", "A")]
    assert t.columns[:6] == ["judge", "model", "overall", "overall:coverage",
                             "overall:n", "overall:rows"]


def test_trait_means(judgments: pl.DataFrame) -> None:
    t = trait_means(judgments)
    got = {(r["judge"], r["model"], r["genre"], r["trait"]): (r["mean"], r["n"])
           for r in t.iter_rows(named=True)}
    # J/A argumentative t1: (10 + 20 + 30) / 3 = 20; t2: (20 + 30 + 40) / 3 = 30;
    # the parse_error row's 99s are excluded
    assert got[("J", "A", "argumentative", "t1")] == (20.0, 3)
    assert got[("J", "A", "argumentative", "t2")] == (30.0, 3)
    assert got[("J", "B", "narrative", "n1")] == (8.0, 1)
    assert ("J", "A", "narrative", "t1") not in got
    assert len(got) == 2 + 2 + 1 + 2  # J/A arg, J/B arg, J/B narr, K/A arg


def test_trait_means_empty() -> None:
    empty = pl.DataFrame(schema=JUDGMENT_SCHEMA)
    assert trait_means(empty).columns == ["judge", "model", "genre", "trait", "mean", "n"]
    assert trait_means(empty).height == 0


def test_to_markdown(judgments: pl.DataFrame) -> None:
    md = to_markdown(table5(judgments), "Weighted score")
    assert md.startswith("### Weighted score")
    assert "| judge | model | overall | argumentative/open | argumentative/constrained " \
           "| narrative/open |" in md
    # B complete: no coverage bracket; A: 190/3 = 63.33 at 50%, 70 at 2/3 → floored 66%
    assert "| J | B | 80.00 | 90.00 | — | 70.00 |" in md
    assert "| J | A | 63.33 (50%) | 70.00 (66%) | 50.00 | — (0%) |" in md
    assert md.index("| J | B |") < md.index("| J | A |") < md.index("| K | A |")
    # two judges → one table per judge, each under its own heading
    assert md.index("#### judge: J") < md.index("| J | B |") < md.index("#### judge: K") \
        < md.index("| K | A |")
    assert md.count("| judge | model | overall") == 2
    one = to_markdown(table5(judgments.filter(pl.col("judge") == "J")), "Weighted score")
    assert "#### judge" not in one and one.count("| judge | model | overall") == 1


def test_export_round_trip(judgments: pl.DataFrame, tmp_path: Path) -> None:
    tables = {"table5": table5(judgments), "traits": trait_means(judgments)}
    paths = export(tables, tmp_path / "out")
    assert set(paths) == {f"{n}.{e}" for n in tables for e in ("parquet", "csv", "md")}
    for name, df in tables.items():
        assert_frame_equal(pl.read_parquet(paths[f"{name}.parquet"]), df)
        csv = pl.read_csv(paths[f"{name}.csv"])
        assert csv.columns == df.columns and csv.height == df.height
    assert "63.33 (50%)" in paths["table5.md"].read_text(encoding="utf-8")
    traits_md = paths["traits.md"].read_text(encoding="utf-8")
    assert "| J | A | argumentative | t1 | 20.00 | 3 |" in traits_md


def test_trait_means_read_every_row_for_the_trait_ids() -> None:
    """Trait ids differ by genre and one appears only after many rows: every id is found,
    a row's traits of other genres are not rows, and "{}" or null values count nowhere."""
    rows = [row("J", "A", "argumentative", "open", "ok", 50.0, {"t1": i % 7, "t2": 3})
            for i in range(300)]
    rows += [row("J", "A", "narrative", "open", "ok", 50.0, {"n1": 4, "late": 9}),
             row("J", "A", "narrative", "open", "ok", 50.0, {"n1": 6}),
             row("J", "A", "narrative", "open", "ok", 50.0, {}),
             row("J", "A", "narrative", "open", "ok", 50.0, None)]
    rows[-1]["trait_scores"] = '{"n1": null}'
    got = {(r["genre"], r["trait"]): (r["mean"], r["n"])
           for r in trait_means(pl.DataFrame(rows, schema=JUDGMENT_SCHEMA)).iter_rows(named=True)}
    assert got == {("argumentative", "t1"): (sum(i % 7 for i in range(300)) / 300, 300),
                   ("argumentative", "t2"): (3.0, 300),
                   ("narrative", "n1"): (5.0, 2), ("narrative", "late"): (9.0, 1)}
    only_empty = pl.DataFrame([row("J", "A", "narrative", "open", "ok", 50.0, {})],
                              schema=JUDGMENT_SCHEMA)
    assert trait_means(only_empty).height == 0
    assert dict(trait_means(only_empty).schema) == {
        "judge": pl.Utf8, "model": pl.Utf8, "genre": pl.Utf8, "trait": pl.Utf8,
        "mean": pl.Float64, "n": pl.Int64}
