"""Issue 25 item 8: a small cell's interval states its heavy-tail limit in the report."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from essaybench.report.tables import leaderboard
from essaybench.stats.score_ci import SMALL_CELL_CAVEAT, SMALL_CELL_PROMPTS, score_cis


def _judgments(n_prompts: int) -> pl.DataFrame:
    rng = np.random.default_rng(n_prompts)
    return pl.DataFrame([{"judge": "j", "model": m, "prompt_id": f"p{p:02d}", "sample_index": 0,
                          "genre": "narrative", "prompt_set": "open", "status": "ok",
                          "score_weighted": q + rng.normal(0, 5)}
                         for p in range(n_prompts) for m, q in (("a", 80.0), ("b", 70.0))])


def test_the_leaderboard_carries_the_caveat_of_small_cells_only() -> None:
    for n, expected in ((SMALL_CELL_PROMPTS - 1, SMALL_CELL_CAVEAT), (SMALL_CELL_PROMPTS, "")):
        judgments = _judgments(n)
        cis = score_cis(judgments)
        stats = {"score_ci_weighted": cis.cells, "score_diff_weighted": cis.pairs}
        rows = leaderboard("j", judgments, stats)
        assert [r.caveat for r in rows] == [expected, expected]
        assert all(r.lo is not None for r in rows)


def test_the_page_marks_small_cells_and_states_the_limit(report_pages: dict[str, Path]
                                                         ) -> None:
    # The fixture's run has 19 prompts per model: every overall cell is a small one.
    html = report_pages["r2"].read_text(encoding="utf-8")
    assert 'class="caveat"' in html and f"† fewer than {SMALL_CELL_PROMPTS} prompts" in html
    assert "heavy lower tail" in html
