"""A failed run reaches the user as a few lines and exit code 1, never a traceback
(issue 12, item 2): what ``essaybench run`` and ``rerun`` wrap the pipeline flow in.
The end-to-end case (judge down, under Prefect) is tests/flows/test_run_health.py."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import typer

from essaybench.bench.generate import ESSAY_COLUMNS
from essaybench.bench.health import RunUnhealthy, assess_health
from essaybench.bench.judge.judgments import JUDGMENT_SCHEMA
from essaybench.cli.failures import failed_run_exits
from essaybench.core.settings import DEFAULT_BENCHMARK_CONFIG, DEFAULT_STORE_ROOT
from essaybench.store.run_stage import StageFailed

DEFAULTS = (Path(DEFAULT_BENCHMARK_CONFIG), Path(DEFAULT_STORE_ROOT))


def _exit_code(exc: BaseException, config: Path, store: Path) -> int:
    with pytest.raises(typer.Exit) as exited, failed_run_exits(config, store):
        raise exc
    return exited.value.exit_code


@pytest.mark.parametrize("stage,rerun_from", [("judge", "judge"), ("generate", "generate"),
                                              ("stats", "aggregate"),
                                              ("pairwise", "aggregate"),
                                              ("alerts", "aggregate"),
                                              ("drift", "judge")])
def test_a_stage_that_raised_says_why_and_what_to_rerun(
        capsys: pytest.CaptureFixture[str], stage: str, rerun_from: str) -> None:
    exc = StageFailed(f"stage {stage!r} of run r1 failed: ValueError: boom", "r1", stage)
    assert _exit_code(exc, *DEFAULTS) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[0] == f"run failed: stage {stage!r} of run r1 failed: ValueError: boom"
    assert err.splitlines()[-1] == f"  essaybench rerun --run r1 --stage {rerun_from}"
    assert "Traceback" not in err


def test_the_rerun_command_names_a_config_and_store_other_than_the_defaults(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    exc = StageFailed("stage 'judge' of run r1 failed: KeyError: 'x'", "r1", "judge")
    assert _exit_code(exc, tmp_path / "my.yaml", tmp_path / "store") == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"  essaybench rerun --run r1 --stage judge --config {tmp_path / 'my.yaml'} "
        f"--store {tmp_path / 'store'}")


def test_a_curation_stage_that_raised_gets_no_benchmark_rerun(
        capsys: pytest.CaptureFixture[str]) -> None:
    exc = StageFailed("stage 'dedup' of run r1 failed: ValueError: x", "r1", "dedup")
    assert _exit_code(exc, *DEFAULTS) == 1
    assert "essaybench rerun" not in capsys.readouterr().err


def test_an_unhealthy_run_prints_its_explanation(capsys: pytest.CaptureFixture[str]) -> None:
    essays = pl.DataFrame([{**dict.fromkeys(ESSAY_COLUMNS), "prompt_id": "p", "model": "w",
                            "sample_index": 0, "status": "ok"}], schema=ESSAY_COLUMNS)
    judgments = pl.DataFrame([{**dict.fromkeys(JUDGMENT_SCHEMA), "prompt_id": "p",
                               "model": "w", "sample_index": 0, "judge": "j",
                               "status": "api_error", "error_kind": "dns",
                               "error": "DNS lookup of judge.invalid failed in 2 ms"}],
                             schema=JUDGMENT_SCHEMA)
    health = assess_health(essays, judgments, run_id="r9")
    assert _exit_code(RunUnhealthy(health, health.explain()), *DEFAULTS) == 1
    err = capsys.readouterr().err
    assert err.startswith("run failed: run r9 is unhealthy: 1 of 1 model × judge cells")
    assert "w × j: 0/1 judged (0%): api_error (dns) ×1" in err
    assert "e.g. DNS lookup of judge.invalid failed in 2 ms" in err
    assert err.splitlines()[-1] == "  essaybench rerun --run r9 --stage judge"


def test_anything_else_is_not_swallowed() -> None:
    with pytest.raises(KeyError), failed_run_exits(*DEFAULTS):
        raise KeyError("a bug")
