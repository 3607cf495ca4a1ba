"""The report artifact's summary: a cell too small for an interval shows a dash, not a
crash (the demo's one judged essay per model has no CI)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from essaybench.tasks.report import summary_markdown


def test_summary_lists_the_overall_cis_and_survives_missing_bounds(tmp_path: Path) -> None:
    page = tmp_path / "reports" / "r1" / "report.html"
    (page.parent / "stats").mkdir(parents=True)
    page.write_text("<html></html>", encoding="utf-8")
    pl.DataFrame({"cell": ["overall", "overall", "argumentative:open"],
                  "judge": ["j", "j", "j"], "model": ["a", "b", "a"],
                  "mean": [61.25, 70.0, 50.0], "ci_lo": [55.0, None, 40.0],
                  "ci_hi": [66.5, None, 60.0], "n": [8, 1, 2]}).write_parquet(
        page.parent / "stats" / "score_ci_weighted.parquet")
    text = summary_markdown("r1", page)
    assert str(page) in text
    assert "| j | b | 70.00 | — | 1 |" in text
    assert "| j | a | 61.25 | [55.00, 66.50] | 8 |" in text
    assert "argumentative" not in text
    assert "95% CI" not in summary_markdown("r2", tmp_path / "nothing" / "report.html")


def test_summary_prints_why_a_cell_has_no_interval(tmp_path: Path) -> None:
    page = tmp_path / "reports" / "r1" / "report.html"
    (page.parent / "stats").mkdir(parents=True)
    pl.DataFrame({"cell": ["overall"], "judge": ["j"], "model": ["b"], "mean": [70.0],
                  "ci_lo": [None], "ci_hi": [None], "n": [3],
                  "ci_note": ["n too small (< 7 prompts)"]},
                 schema_overrides={"ci_lo": pl.Float64, "ci_hi": pl.Float64}).write_parquet(
        page.parent / "stats" / "score_ci_weighted.parquet")
    assert "| j | b | 70.00 | n too small (< 7 prompts) | 3 |" in summary_markdown("r1", page)
