"""The report's adaptive-sampling section (report/adaptive.py): shown only for a run with
an ``adaptive`` snapshot, every text escaped, the leaderboard told its intervals come from
an adaptively stopped sample."""

from __future__ import annotations

import polars as pl

from essaybench.report import write_report
from essaybench.report.adaptive import adaptive_lines, adaptive_view
from essaybench.stages.adaptive import FIXED_N_NOTE
from essaybench.stages.aggregate import aggregate_stage
from essaybench.store import Snapshot, Store
from tests.conftest import JudgedRun

HOSTILE = '<script>alert(1)</script>"onmouseover=alert(2)'


def _decisions(store: Store, judged: Snapshot, run_id: str) -> None:
    """An adaptive snapshot of ``run_id`` with hostile text where names go."""
    table = pl.DataFrame({
        "kind": ["pair", "change"], "first": [HOSTILE, "qwen-writer"],
        "second": ["qwen-writer", "qwen-writer"], "outcome": ["first_better", "undecided"],
        "label": [f"{HOSTILE} better", "undecided"], "decided_round": [2, None],
        "decided_at_prompts": [8, None], "n_obs": [8, 12], "estimate": [12.5, -0.5],
        "lo": [0.5, -9.0], "hi": [30.0, 8.0], "alpha": [0.05, 0.05],
        "stop": ["max_prompts"] * 2, "n_sampled": [12, 12]},
        schema_overrides={"decided_round": pl.Int64, "decided_at_prompts": pl.Int64})
    stage_run = store.start_stage_run(run_id, "adaptive", [judged.snapshot_id], {}, "test")
    snap = store.write_snapshot("adaptive", table, [judged.snapshot_id], {
        "stop": "max_prompts", "sampled": 12, "of": 20, "rounds": [{"index": 1}] * 3,
        "baseline": HOSTILE, "sampled_prompts": ["p1", HOSTILE], "note": FIXED_N_NOTE})
    store.finish_stage_run(stage_run, status="ok", snapshot_id=snap.snapshot_id)


def test_the_section_is_shown_escaped_and_only_for_adaptive_runs(
        judged_copy: JudgedRun) -> None:
    store, judged, _ = judged_copy
    aggregate_stage(store, "r8", judged)
    plain = write_report(store, "r8").read_text(encoding="utf-8")
    assert 'id="adaptive"' not in plain and "adaptively stopped" not in plain
    assert adaptive_view(store, "r8") is None
    _decisions(store, judged, "r8")
    html = write_report(store, "r8").read_text(encoding="utf-8")
    assert 'id="adaptive"' in html
    assert "<script>alert" not in html and '"onmouseover' not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "12 of 20 prompts sampled in 3 rounds" in html
    assert "adaptively stopped sample" in html and "not anytime-valid" in html
    view = adaptive_view(store, "r8")
    assert view is not None
    lines = adaptive_lines(view)
    assert lines[0] == ("adaptive sampling: 12 of 20 prompts in 3 rounds, stopped: "
                        "max_prompts; 1 of 2 questions decided")
    assert lines[2].startswith("  qwen-writer since") and "undecided after 12 prompts" in \
        lines[2]
