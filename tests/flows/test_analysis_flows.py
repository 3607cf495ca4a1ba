"""The analysis commands end to end: CLI → Prefect flow → stage → snapshot + report."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from essaybench.cli import app
from essaybench.store import Snapshot, Store

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_engine")]


def _stages(store: Path, run_id: str) -> list[str]:
    with duckdb.connect(str(store / "catalog.duckdb"), read_only=True) as con:
        rows = con.execute("select stage from stage_runs where run_id = ? and status = 'ok' "
                           "order by started_at", [run_id]).fetchall()
    return [s for (s,) in rows]


def test_stats_and_agreement_commands(judged_copy: tuple[Store, Snapshot, Snapshot],
                                      tmp_path: Path) -> None:
    store, judged, _ = judged_copy
    out = CliRunner().invoke(app, ["stats", "--run", "r1", "--store", str(store.root)])
    assert out.exit_code == 0, out.output
    assert "Bradley–Terry ranking" in out.output and "stats.md" in out.output
    assert "stats" in _stages(store.root, "r1")

    rows = [{"prompt_id": p, "model_a": "gpt-writer", "model_b": "qwen-writer",
             "annotator": who, "verdict": "A"}
            for p in judged.read()["prompt_id"].unique().to_list() for who in ("x", "y", "z")]
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), "utf-8")
    out = CliRunner().invoke(app, ["agreement", "--run", "r1", "--annotations", str(path),
                                   "--store", str(store.root)])
    assert out.exit_code == 0, out.output
    assert "agreement.md" in out.output and "agreement" in _stages(store.root, "r1")

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt_id": "p", "model_a": "a", "model_b": "b", "annotator": "x", '
                   '"verdict": "C"}\n', "utf-8")
    out = CliRunner().invoke(app, ["agreement", "--run", "r1", "--annotations", str(bad),
                                   "--store", str(store.root)])
    # Checked before Prefect starts: one message naming file and line, exit code 2.
    # (rich folds a long path anywhere: compare without the box and the white space)
    assert out.exit_code == 2 and "bad.jsonl:1" in "".join(out.output.replace("│", "").split())


def test_wpb_report_command(shared_data: Path, tmp_path: Path) -> None:
    data = shared_data / "writingpreferencebench"
    out = CliRunner().invoke(app, ["wpb-report", "--data", str(data), "--n-boot", "300",
                                   "--store", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert "58.8%" in out.output  # the second annotator's exact agreement (README: 58.8%)
    report = next((tmp_path / "reports").glob("*/wpb_report/wpb_report.md"))
    assert "Headline" in report.read_text(encoding="utf-8")


def test_agreement_ignore_unknown_leaves_the_rows_out_and_says_so(
        judged_copy: tuple[Store, Snapshot, Snapshot], tmp_path: Path) -> None:
    """Issue 13: rows naming what the run lacks were accepted silently; with
    --ignore-unknown the stage leaves them out and counts them (its params record the
    user's own file and the flag; no filtered copy is written)."""
    store, judged, _ = judged_copy
    prompts = judged.read()["prompt_id"].unique().sort().to_list()
    rows = [{"prompt_id": p, "model_a": "gpt-writer", "model_b": b, "annotator": who,
             "verdict": "A"}
            for p in prompts for b in ("qwen-writer", "deepseek-writer", "ghost-writer")
            for who in ("x", "y", "z")]
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), "utf-8")
    out = CliRunner().invoke(app, ["agreement", "--run", "r1", "--annotations", str(path),
                                   "--store", str(store.root), "--ignore-unknown"])
    assert out.exit_code == 0, out.output
    ghosts = 3 * len(prompts)
    assert f"ignored {ghosts} annotation row(s)" in " ".join(out.output.split())
    with duckdb.connect(str(store.root / "catalog.duckdb"), read_only=True) as con:
        (params, meta) = con.execute(
            "select params, meta from stage_runs where run_id = 'r1' and stage = 'agreement' "
            "and status = 'ok'").fetchone() or (None, None)
    recorded = json.loads(params)
    assert recorded["annotations"] == str(path) and recorded["ignore_unknown"] is True
    assert json.loads(meta)["dropped"] == ghosts
    assert not list((store.root / "reports").rglob("*.checked.jsonl"))
