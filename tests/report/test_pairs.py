"""The pairwise view's data (pairs.py): every comparison of the pairwise stage once in the
page's index, naming its two essays by their places in the essay index, with the verdicts
of both orders as the stage's table has them; the analyses in chunk files beside the page,
where run text stays data; the page shows the view only when pairwise judging ran."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from essaybench.report.browser import chunk_data, json_for_script
from essaybench.report.data import RunData, load_run
from essaybench.report.page import render_report
from essaybench.report.pairs import pairs_data
from essaybench.report.write import chunks_folder
from tests.report.conftest import HOSTILE, ReportedRuns
from tests.report.test_report_browser import _index, decode_pairs

CODE = {"A": 0, "B": 1, "tie": 2, None: None}


@pytest.fixture(scope="module")
def run(reported_runs: ReportedRuns) -> RunData:
    return load_run(reported_runs.store, "r2")


def test_every_comparison_once_with_its_essays_and_verdicts(
        run: RunData, report_pages: dict[str, Path]) -> None:
    page = report_pages["r2"]
    essays = _index(page)
    assert run.pairwise is not None
    view = pairs_data(run.pairwise, [r[0] for r in essays["essays"]], chunk_bytes=400)
    index, rows = view.index, decode_pairs(view.index)
    assert len(rows) == run.pairwise.height == view.n_pairs == 48
    assert index["missing"] == 0
    assert len(view.chunks) > 1 and index["chunks"] == [c.name for c in view.chunks]
    details: list[dict[str, Any]] = []
    assert len(index["chunk_first"]) == len(view.chunks)
    for chunk, first in zip(view.chunks, index["chunk_first"], strict=True):
        name, data = chunk_data(chunk.body)
        assert name == chunk.name and data["first"] == first == len(details)
        details += data["pairs"]
    assert len(details) == len(rows)

    # Each index row, read back through the essay index, is one row of the stage's table.
    seen = set()
    table = {(r["judge"], r["prompt_id"], r["sample_index"], r["model_a"], r["model_b"]): r
             for r in run.pairwise.iter_rows(named=True)}
    for k, (row, detail) in enumerate(zip(rows, details, strict=True)):
        ea, eb = essays["essays"][row["a"]], essays["essays"][row["b"]]
        model_a, model_b = essays["models"][ea[2]], essays["models"][eb[2]]
        assert ea[1] == eb[1] and ea[3] == eb[3]  # the same prompt, the same sample
        key = (row["judge"], essays["prompts"][ea[1]][0], ea[3], model_a, model_b)
        assert key not in seen
        seen.add(key)
        want = table[key]
        assert row["status"] == want["status"]
        assert (row["ab"], row["ba"]) == (CODE[want["verdict_ab"]], CODE[want["verdict_ba"]])
        # the merged verdict and consistency follow from the two orders, as the table has
        if want["status"] == "ok":
            assert want["consistent"] == (row["ab"] == row["ba"])
            assert CODE[want["verdict"]] == (row["ab"] if row["ab"] == row["ba"] else 2)
        held = chunk_data(view.chunks[row["chunk"]].body)[1]
        assert held["first"] <= k < held["first"] + len(held["pairs"])
        for order in ("ab", "ba"):
            assert detail[order]["status"] == want[f"status_{order}"]
            assert detail[order].get("analysis") == want[f"analysis_{order}"]
            assert detail[order].get("position") == want[f"position_verdict_{order}"]
            assert detail[order].get("error") == want[f"error_{order}"]
        assert detail.get("error") == want["error"]
    assert seen == set(table)
    # Position-inconsistent: both orders ok and their verdicts differ (counted here from
    # the calls, not from the table's own flag).
    inconsistent = sum(1 for r in table.values() if r["status_ab"] == r["status_ba"] == "ok"
                       and r["verdict_ab"] != r["verdict_ba"])
    assert inconsistent == view.n_inconsistent > 0
    assert inconsistent == sum(1 for r in run.pairwise["consistent"].to_list() if r is False)
    # Listed in prompt order (the first essay's place in the essay index).
    assert [r["a"] for r in rows] == sorted(r["a"] for r in rows)
    assert view.options["pair"] == sorted({f"{m[3]} vs {m[4]}" for m in table})


def test_an_analysis_stays_text(run: RunData, report_pages: dict[str, Path]) -> None:
    assert run.pairwise is not None
    evil = run.pairwise.with_columns(pl.lit(HOSTILE + "\u2028").alias("analysis_ab"),
                                     pl.lit("<!--" + HOSTILE).alias("error"))
    ids = [r[0] for r in _index(report_pages["r2"])["essays"]]
    view = pairs_data(evil, ids)
    body = view.chunks[0].body.decode("utf-8")
    page_json = json_for_script(view.index)
    assert "<" not in body and "\u2028" not in body and "<" not in page_json
    _, data = chunk_data(view.chunks[0].body)
    assert {p["ab"]["analysis"] for p in data["pairs"]} == {HOSTILE + "\u2028"}
    assert {p["error"] for p in data["pairs"]} == {"<!--" + HOSTILE}
    # Essays not in the report: the comparisons are left out and counted.
    alone = pairs_data(evil, ids[:30])
    assert 0 < alone.index["missing"] < 48 and alone.n_pairs == 48 - alone.index["missing"]


def test_the_page_has_the_view_only_where_pairwise_ran(
        run: RunData, report_pages: dict[str, Path]) -> None:
    html = report_pages["r2"].read_text(encoding="utf-8")
    raw = html.split('<script type="application/json" id="pair-index">', 1)[1]
    index = json.loads(raw.split("</script>", 1)[0])
    assert len(index["pairs"]) == 3 * 48
    assert all((chunks_folder(report_pages["r2"]) / n).is_file() for n in index["chunks"])
    assert 'id="pair-inconsistent"' in html and "48 of 48 comparisons" in html
    without = render_report(dataclasses.replace(run, pairwise=None))
    assert 'id="pair-index"' not in without and 'id="pair-list"' not in without


def test_two_judges_compare_the_same_pairs(run: RunData, report_pages: dict[str, Path]
                                           ) -> None:
    """Each judge's verdict on a pair is its own comparison, listed together (the same
    essays, judge by judge), and the page offers a judge filter."""
    assert run.pairwise is not None
    second = run.pairwise.with_columns(
        pl.lit("j2").alias("judge"), pl.col("verdict_ba").alias("verdict_ab"))
    both = pl.concat([run.pairwise, second])
    ids = [r[0] for r in _index(report_pages["r2"])["essays"]]
    view = pairs_data(both, ids)
    rows = decode_pairs(view.index)
    assert view.index["judges"] == ["j2", "qwen-judge"] and view.n_pairs == 96
    assert [(r["a"], r["b"]) for r in rows[0::2]] == [(r["a"], r["b"]) for r in rows[1::2]]
    assert [r["judge"] for r in rows[:2]] == ["j2", "qwen-judge"]
    # j2 said in order AB what qwen-judge said in BA, and BA the same: never inconsistent
    j2 = [r for r in rows if r["judge"] == "j2" and r["status"] == "ok"]
    assert j2 and all(r["ab"] == r["ba"] for r in j2)
    assert view.n_inconsistent == 18  # qwen-judge's alone
    html = render_report(dataclasses.replace(run, pairwise=both))
    assert 'id="pair-filter-judge"' in html and "96 of 96 comparisons" in html
