"""Run health from the essays and judgments tables: counts, coverage, the floor, the
explanation (issue 12, item 2)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from essaybench.bench.config import BenchmarkConfigError, load_benchmark_config
from essaybench.bench.generate import ESSAY_COLUMNS
from essaybench.bench.health import (
    RunHealth,
    RunUnhealthy,
    assess_health,
    call_counts,
    health_of_meta,
)
from essaybench.bench.judge.judgments import JUDGMENT_SCHEMA

REFUSED = "connection refused by 127.0.0.1:9 in 1 ms (nothing listening: the endpoint is down)"


def _essay(pid: str, model: str, status: str = "ok", kind: str | None = None,
           error: str | None = None) -> dict[str, Any]:
    return {**dict.fromkeys(ESSAY_COLUMNS), "prompt_id": pid, "model": model,
            "sample_index": 0, "genre": "narrative", "prompt_set": "open", "status": status,
            "error_kind": kind, "error": error, "decision": "kept" if status == "ok" else status}


def _judgment(pid: str, model: str, judge: str, status: str = "ok", kind: str | None = None,
              error: str | None = None) -> dict[str, Any]:
    return {**dict.fromkeys(JUDGMENT_SCHEMA), "prompt_id": pid, "model": model,
            "sample_index": 0, "genre": "narrative", "prompt_set": "open", "judge": judge,
            "status": status, "error_kind": kind, "error": error,
            "score_weighted": 70.0 if status == "ok" else None}


def _tables(essays: list[dict[str, Any]], judgments: list[dict[str, Any]]
            ) -> tuple[pl.DataFrame, pl.DataFrame]:
    return (pl.DataFrame(essays, schema=ESSAY_COLUMNS, orient="row"),
            pl.DataFrame(judgments, schema=JUDGMENT_SCHEMA, orient="row"))


PIDS = [f"p{i}" for i in range(10)]


def _writer_down() -> tuple[pl.DataFrame, pl.DataFrame]:
    """writer-a: every essay judged; writer-down: its endpoint refused every essay."""
    essays = [_essay(p, "writer-a") for p in PIDS] + [
        _essay(p, "writer-down", "api_error", "connection_refused", REFUSED) for p in PIDS]
    judgments = [_judgment(p, "writer-a", "judge") for p in PIDS] + [
        _judgment(p, "writer-down", "judge", "skipped", "essay_api_error",
                  "essay status api_error: " + REFUSED) for p in PIDS]
    return _tables(essays, judgments)


def _judge_down() -> tuple[pl.DataFrame, pl.DataFrame]:
    """Every essay written; the judge endpoint refused 9 of 10 calls per writer."""
    essays = [_essay(p, m) for m in ("writer-a", "writer-b") for p in PIDS]
    judgments = [_judgment(p, m, "judge", *(("ok",) if i == 0 else
                                            ("api_error", "connection_refused", REFUSED)))
                 for m in ("writer-a", "writer-b") for i, p in enumerate(PIDS)]
    return _tables(essays, judgments)


def test_cells_below_the_floor_name_the_essay_failures_and_rerun_generate() -> None:
    essays, judgments = _writer_down()
    health = assess_health(essays, judgments, run_id="r1", coverage_floor=0.9)
    assert not health.ok and [c.model for c in health.failing] == ["writer-down"]
    down = health.failing[0]
    assert (down.total, down.ok, down.coverage, down.essay_failures) == (10, 0, 0.0, 10)
    assert down.by_status == {"skipped": 10}
    assert down.causes == {"essay api_error (connection_refused)": 10}
    assert down.sample_error == REFUSED  # the essay's own error, not "essay status ..."
    assert health.rerun_stage == "generate"
    text = health.explain()
    assert text.splitlines()[0] == ("run r1 is unhealthy: 1 of 2 model × judge cells below "
                                    "the 90% coverage floor (writer-down × judge 0%)")
    assert "writer-down × judge: 0/10 judged (0%): essay api_error (connection_refused) ×10" \
        in text
    assert f"e.g. {REFUSED}" in text and "writer-a" not in text
    assert "fix what stopped the calls" in text
    assert text.splitlines()[-1] == "  essaybench rerun --run r1 --stage generate"


def test_judge_endpoint_down_reruns_judge_with_the_run_s_config_and_store() -> None:
    essays, judgments = _judge_down()
    health = assess_health(essays, judgments, run_id="r2", coverage_floor=0.9)
    assert [(c.model, c.coverage) for c in health.failing] == [("writer-a", 0.1),
                                                               ("writer-b", 0.1)]
    assert health.failing[0].causes == {"api_error (connection_refused)": 9}
    assert health.failing[0].api_errors == 9 and health.rerun_stage == "judge"
    text = health.explain("my config.yaml", "/data/store")
    assert text.splitlines()[-1] == ("  essaybench rerun --run r2 --stage judge "
                                     "--config 'my config.yaml' --store /data/store")


@pytest.mark.parametrize("floor,ok", [(0.1, True), (0.11, False), (0.0, True), (1.0, False)])
def test_the_floor_is_inclusive(floor: float, ok: bool) -> None:
    essays, judgments = _judge_down()  # 10% coverage in every cell
    assert assess_health(essays, judgments, run_id="r", coverage_floor=floor).ok is ok


def test_a_healthy_run_says_so() -> None:
    essays = [_essay(p, "writer-a") for p in PIDS]
    judgments = [_judgment(p, "writer-a", "judge") for p in PIDS[:9]] + [
        _judgment(PIDS[9], "writer-a", "judge", "parse_error", "schema", "bad json")]
    health = assess_health(*_tables(essays, judgments), run_id="r", coverage_floor=0.9)
    assert health.ok and health.failing == []
    assert health.summary() == ("healthy: every model × judge cell at or above the 90% "
                                "coverage floor (lowest 90%)")


def test_model_answers_that_fail_get_their_own_advice() -> None:
    essays = [_essay(p, "tiny", "truncated", "length", "reply hit max_tokens=700")
              for p in PIDS]
    judgments = [_judgment(p, "tiny", "judge", "skipped", "essay_truncated",
                           "essay status truncated") for p in PIDS]
    health = assess_health(*_tables(essays, judgments), run_id="r", coverage_floor=0.9)
    text = health.explain()
    assert "essay truncated (length) ×10" in text and "e.g. reply hit max_tokens=700" in text
    assert "raise max_tokens" in text and "fix what stopped the calls" not in text


def test_nothing_judged_is_not_healthy() -> None:
    health = assess_health(*_tables([], []), run_id="r", coverage_floor=0.9)
    assert not health.ok and "nothing was judged" in health.summary()


def test_judgments_from_before_error_kinds_still_explain() -> None:
    essays, judgments = _judge_down()
    health = assess_health(essays, judgments.drop("error_kind"), run_id="r")
    assert health.failing[0].causes == {"api_error": 9}


def test_call_counts_per_model() -> None:
    essays, judgments = _writer_down()
    counts = call_counts(essays, "model")
    assert counts["writer-a"].model_dump() == {
        "total": 10, "ok": 10, "failed": 0, "skipped": 0, "coverage": 1.0, "by_status": {},
        "error_kinds": {}, "sample_error": None}
    down = counts["writer-down"]
    assert (down.total, down.ok, down.failed, down.coverage) == (10, 0, 10, 0.0)
    assert down.by_status == {"api_error": 10}
    assert down.error_kinds == {"connection_refused": 10} and down.sample_error == REFUSED
    judged = call_counts(judgments, "judge")["judge"]
    assert (judged.total, judged.ok, judged.failed, judged.skipped) == (20, 10, 0, 10)


def test_health_survives_the_catalog_and_pickling() -> None:
    essays, judgments = _writer_down()
    health = assess_health(essays, judgments, run_id="r1")
    assert health_of_meta({"health": health.model_dump(mode="json")}) == health
    assert health_of_meta({"seconds": 1.0}) is None and health_of_meta(None) is None
    exc = pickle.loads(pickle.dumps(RunUnhealthy(health, health.explain())))
    assert isinstance(exc, RunUnhealthy) and exc.health == health
    assert str(exc) == health.explain() and isinstance(exc.health, RunHealth)


def _config(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "benchmark.yaml"
    path.write_text("generate: {models: [w]}\njudge: {judges: [j]}\n" + extra,
                    encoding="utf-8")
    return path


def test_the_floor_is_configured_and_validated(tmp_path: Path) -> None:
    assert load_benchmark_config(_config(tmp_path, "")).health.coverage_floor == 0.9
    config = load_benchmark_config(_config(tmp_path, "health: {coverage_floor: 0.5}\n"))
    assert config.health.coverage_floor == 0.5
    with pytest.raises(BenchmarkConfigError, match="coverage_floor"):
        load_benchmark_config(_config(tmp_path, "health: {coverage_floor: 1.5}\n"))
    with pytest.raises(BenchmarkConfigError, match="floor"):
        load_benchmark_config(_config(tmp_path, "health: {floor: 0.5}\n"))


def test_many_failing_cells_fit_a_screen() -> None:
    models = [f"writer-{i:02d}" for i in range(12)]
    essays = [_essay(p, m) for m in models for p in PIDS]
    judgments = [_judgment(p, m, "judge", "api_error", "read_timeout", "no reply")
                 for m in models for p in PIDS]
    text = assess_health(*_tables(essays, judgments), run_id="r").explain()
    assert len(text.splitlines()) == 1 + 8 * 2 + 1 + 2
    assert "… and 4 more cells below the floor" in text


def test_a_share_just_below_the_floor_does_not_print_as_the_floor() -> None:
    essays = [_essay(f"q{i}", "w") for i in range(1000)]
    judgments = [_judgment(f"q{i}", "w", "judge", *(("ok",) if i < 899 else
                                                  ("api_error", "read_timeout", "slow")))
                 for i in range(1000)]
    health = assess_health(*_tables(essays, judgments), run_id="r", coverage_floor=0.9)
    assert not health.ok and "(w × judge 89.9%)" in health.summary()
    assert "below the 90% coverage floor" in health.summary()
