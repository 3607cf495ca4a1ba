"""`essaybench demo`, the README's first command, end to end on the embedded model (issue 14
item 5): two writer configurations compared on the same prompts, every Table 5 cell shown
filled, intervals and a paired difference printed, off-language essays counted, the HTML
report written and its path printed, and an honest note on what the scores mean.

Its wall time (≤ 4 minutes after setup on 2 cores) is a speed target: README quotes the
measured figure; this test asserts what the demo shows, not how fast."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from essaybench.bench.config import load_benchmark_config
from essaybench.cli.benchmark import DEMO_NOTE
from essaybench.core.paths import PROJECT_ROOT
from essaybench.stats.cluster_t import NOTE_NO_SPREAD
from tests.cli.test_demo_sealed import hostile

pytestmark = pytest.mark.slow

WRITERS = ["smollm2-135m-para", "smollm2-135m-para-zh"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    root = tmp_path_factory.mktemp("demo")
    env = {**os.environ, "PREFECT_HOME": str(root / "prefect"), "DO_NOT_TRACK": "1",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "COLUMNS": "160"}
    env.pop("ESSAYBENCH_EMBEDDED_REPLICAS", None)
    # A shell set up for a worker: the demo must obey none of it (issue 24, item 4).
    hostile_root = root / "hostile"
    env |= hostile(hostile_root)
    store = root / "store"
    proc = subprocess.run(
        [sys.executable, "-m", "essaybench.cli", "demo", "--store", str(store)],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=1500)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert not hostile_root.exists()  # nothing read from, written or published there
    assert "demo: ignoring ESSAYBENCH_BENCHMARK_CONFIG" in output
    return output, store


def _run_reports(store: Path) -> Path:
    [run] = [p for p in (store / "reports").iterdir() if p.is_dir() and "T" in p.name]
    return run


def test_progress_and_the_honest_note(demo: tuple[str, Path]) -> None:
    output, _ = demo
    assert re.search(r"^progress: stage generate running \w+; generate smollm2-135m-para "
                     r"\d+/8", output, re.M), output
    # the embedded model is in use: the waiting message says it is slow
    assert "generating and judging (the embedded model is slow: minutes)…" in output
    assert " ".join(DEMO_NOTE.split()) in " ".join(output.split())


def _judged(store: Path) -> pl.DataFrame:
    """The judge snapshot's rows, read directly: the independent side of each check below."""
    [snapshot] = (store / "snapshots" / "judge").glob("judge-*.parquet")
    return pl.read_parquet(snapshot).with_columns(
        cell=pl.concat_str("genre", pl.lit("/"), "prompt_set"))


def test_two_writers_every_shown_cell_filled(demo: tuple[str, Path]) -> None:
    """Every cell the table shows has a mean, and its coverage is the share of that writer's
    prompts in the cell whose essay was judged, at or above the run's coverage floor (an
    essay the 135M writer runs past its token budget on is truncated and not judged, which
    the table shows as coverage below 100%, never as a score)."""
    _, store = demo
    table5 = pl.read_parquet(_run_reports(store) / "table5_weighted.parquet")
    assert sorted(table5["model"].to_list()) == WRITERS
    shown = [c.removesuffix(":coverage") for c in table5.columns if c.endswith(":coverage")]
    assert "overall" in shown and len(shown) >= 3
    judged = _judged(store)
    floor = load_benchmark_config(PROJECT_ROOT / "configs" / "benchmark.yaml").health.coverage_floor
    for cell in shown:
        for model, mean, coverage in table5.select("model", cell, f"{cell}:coverage").rows():
            rows = judged.filter(pl.col("model") == model)
            if cell != "overall":
                rows = rows.filter(pl.col("cell") == cell)
            if rows.is_empty():  # a cell this writer has no prompt in is not shown
                assert coverage is None, (model, cell)
                continue
            share = rows.filter(pl.col("status") == "ok").height / rows.height
            assert mean is not None and coverage == pytest.approx(share), (model, cell)
            assert coverage >= floor, (model, cell, coverage)


def test_intervals_and_a_paired_difference(demo: tuple[str, Path]) -> None:
    """Each writer's overall score has a 95% interval around its mean, unless every prompt
    got the same score (then the note says so and no interval is made up); at least one
    writer's interval is shown, and the paired difference is printed with its interval."""
    output, store = demo
    stats = _run_reports(store) / "stats"
    overall = pl.read_parquet(stats / "score_ci_weighted.parquet").filter(
        pl.col("cell") == "overall")
    assert sorted(overall["model"].to_list()) == WRITERS
    judged = _judged(store).filter(pl.col("status") == "ok")
    with_interval = 0
    for row in overall.rows(named=True):
        scores = judged.filter(pl.col("model") == row["model"])["score_weighted"]
        assert row["n"] == scores.len() and row["mean"] == pytest.approx(scores.mean())
        if scores.n_unique() == 1:
            assert row["ci_note"] == NOTE_NO_SPREAD and row["ci_lo"] is None, row
            continue
        with_interval += 1
        assert row["ci_lo"] <= row["mean"] <= row["ci_hi"], row
    assert with_interval >= 1, overall
    [diff] = pl.read_parquet(stats / "score_diff_weighted.parquet").filter(
        pl.col("cell") == "overall").rows(named=True)
    assert {diff["model_a"], diff["model_b"]} == set(WRITERS)
    assert diff["diff_lo"] is not None and diff["diff_lo"] <= diff["diff"] <= diff["diff_hi"]
    assert re.search(r"^  smollm2-135m-para(-zh)? − smollm2-135m-para(-zh)?: [+-]\d+\.\d\d "
                     r"\[[+-]\d+\.\d\d, [+-]\d+\.\d\d\] (indistinguishable|different)",
                     output, re.M), output
    assert "Overall weighted score, 95% CI" in output


def test_off_language_counted_and_report_written(demo: tuple[str, Path]) -> None:
    output, store = demo
    for writer in WRITERS:
        assert re.search(rf"^{re.escape(writer)}: \d+ of \d+ essays not written in Chinese",
                         output, re.M), output
    match = re.search(r"^report: (\S+report\.html)", output, re.M)
    assert match, output
    report = Path(match.group(1))
    assert report.is_file() and report.is_relative_to(store)
    html = report.read_text(encoding="utf-8")
    assert all(writer in html for writer in WRITERS)
