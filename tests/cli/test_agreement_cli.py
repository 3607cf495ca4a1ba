"""`essaybench agreement` refuses annotations that do not fit the run, before Prefect starts
(issue 13: unknown essay ids and models were accepted silently and the report written with
NaN correlations; scores of 99 and -5 were accepted; 1e300 crashed the stage)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from essaybench.cli import app
from essaybench.store import Snapshot, Store


def _flat(output: str) -> str:
    """The CLI's output as one line: rich boxes and wraps long messages."""
    return " ".join(output.replace("│", " ").split())


def _agreement(store: Store, *args: str) -> tuple[int, str]:
    out = CliRunner().invoke(app, ["agreement", "--run", "r1", "--store", str(store.root),
                                   *args])
    return out.exit_code, _flat(out.output)


@pytest.fixture
def annotations_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "ann"
    folder.mkdir()
    monkeypatch.chdir(folder)  # short relative paths: the messages name them whole
    return folder


def test_unknown_models_and_prompts_stop_with_file_line_and_values(
        judged_copy: tuple[Store, Snapshot, Snapshot], annotations_dir: Path) -> None:
    store, judged, _ = judged_copy
    prompt = str(judged.read()["prompt_id"][0])
    # Three annotators per pair (what the stage needs): lines 1-3 are fine, 4-6 name a
    # model the run did not have, 7-9 a prompt it did not write.
    pairs = [(prompt, "gpt-writer", "qwen-writer"), (prompt, "gpt-writer", "ghost-writer"),
             ("no-such-prompt", "gpt-writer", "qwen-writer")]
    rows = [{"prompt_id": p, "model_a": a, "model_b": b, "annotator": who, "verdict": "A"}
            for p, a, b in pairs for who in ("x", "y", "z")]
    (annotations_dir / "pairs.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code, output = _agreement(store, "--annotations", "pairs.jsonl")
    assert code == 2
    assert "pairs.jsonl:4: 6 annotation row(s) name what run r1 does not have" in output
    assert "unknown models 'ghost-writer' (lines 4, 5, 6)" in output
    assert "unknown prompts 'no-such-prompt' (lines 7, 8, 9)" in output
    assert "--ignore-unknown" in output
    assert not (store.root / "reports" / "r1" / "agreement").exists()  # nothing ran


@pytest.mark.parametrize("score", ["99", "-5", "1e300", "nan"])
def test_scores_off_the_scale_stop_with_file_and_line(
        judged_copy: tuple[Store, Snapshot, Snapshot], annotations_dir: Path,
        score: str) -> None:
    store, judged, _ = judged_copy
    prompt = str(judged.read()["prompt_id"][0])
    # Two annotators (what the stage needs); y's second score is the bad one.
    (annotations_dir / "scores.csv").write_text(
        "prompt_id,model,annotator,score\n"
        f"{prompt},gpt-writer,x,3\n{prompt},qwen-writer,x,2\n"
        f"{prompt},gpt-writer,y,3\n{prompt},qwen-writer,y,{score}\n", encoding="utf-8")
    code, output = _agreement(store, "--annotations", "scores.csv", "--kind", "absolute")
    assert code == 2 and "scores.csv:5: field 'score'" in output


def test_a_declared_scale_is_the_one_checked_and_must_be_sound(
        judged_copy: tuple[Store, Snapshot, Snapshot], annotations_dir: Path) -> None:
    store, judged, _ = judged_copy
    prompt = str(judged.read()["prompt_id"][0])
    (annotations_dir / "scores.csv").write_text(
        f"prompt_id,model,annotator,score\n{prompt},gpt-writer,x,80\n", encoding="utf-8")
    code, output = _agreement(store, "--annotations", "scores.csv", "--kind", "absolute",
                              "--scale", "1-5")
    assert code == 2 and "80 is outside the scale 1–5" in output
    for bad, why in (("5-1", "low < high"), ("high", "not a scale")):
        code, output = _agreement(store, "--annotations", "scores.csv", "--kind", "absolute",
                                  "--scale", bad)
        assert code == 2 and why in output and "--scale" in output
    code, output = _agreement(store, "--annotations", "scores.csv", "--scale", "0-100")
    assert code == 2 and "absolute scores only" in output


def test_a_missing_store_or_run_is_named(tmp_path: Path) -> None:
    code, output = _agreement(Store(tmp_path / "nowhere"), "--annotations", "x.jsonl")
    assert code == 2 and "no store at" in output and "nowhere" in output
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize(("kind", "tiers", "why"), [
    ("absolute", "top/median/bottom", "applies to pairwise annotations"),
    ("pairwise", "1/2.5/7", "within-prompt ranks"),
    ("pairwise", "1/1,2/3", "a value is in two tiers"),
    ("absolute", "3/2", "expected high/medium/low"),
])
def test_tiers_are_checked_for_the_kind(tmp_path: Path, kind: str, tiers: str,
                                        why: str) -> None:
    """Issue 16: --tiers is HIGH/MEDIUM/LOW score values (absolute) or within-prompt ranks
    or top/median/bottom (pairwise); a value that does not fit is one line, exit 2."""
    code, output = _agreement(Store(tmp_path / "nowhere"), "--annotations", "x.jsonl",
                              "--kind", kind, "--tiers", tiers)
    assert code == 2 and why in output and "--tiers" in output
