"""Week-over-week alert rules on hand-made essays and judgments: each rule fires on the
change it watches, and stays quiet within its threshold or within noise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

from essaybench.bench.alerts import (
    Alert,
    AlertParams,
    alert_lines,
    alerts_frame,
    alerts_of_frame,
    compute_alerts,
    model_metrics,
    shown_url,
)
from essaybench.bench.compliance import is_off_language
from essaybench.bench.config import BenchmarkConfigError, load_benchmark_config
from essaybench.bench.flagged_rule import FlaggedRule

PROMPT = "以“门”为题写一篇约100字的作文。"
N = 20
GOOD = "门" * 100  # compliant: about 100 characters


def essays(text: str = GOOD, *, n_failed: int = 0, latency: float = 1.0,
           cost: float | None = 0.001, returned: str = "writer-2025-01",
           finish: str = "stop", texts: list[str] | None = None) -> pl.DataFrame:
    rows: list[dict[str, Any]] = []
    for i in range(N):
        failed = i < n_failed
        essay = texts[i] if texts is not None else text
        rows.append({
            "prompt_id": f"p{i}", "model": "writer", "model_id": "writer-latest",
            "returned_model": None if failed else returned,
            "prompt_set_version": "ps-1", "prompt_text": PROMPT,
            "status": "api_error" if failed else "ok",
            "essay_text": None if failed else essay, "raw_text": None if failed else essay,
            "finish_reason": None if failed else finish,
            "latency_s": None if failed else latency + i / 100,
            "cost_usd": None if failed else cost})
    return pl.DataFrame(rows)


def judged(scores: list[float], judge_id: str = "judge-v1") -> pl.DataFrame:
    return pl.DataFrame([{
        "prompt_id": f"p{i}", "model": "writer", "judge": "judge", "status": "ok",
        "score_weighted": s, "judge_returned_model": judge_id, "rubric_id": "essaybench.v1",
        "rubric_fingerprint": "abc"} for i, s in enumerate(scores)])


BASE_SCORES = [60.0 + (i % 5) * 3 for i in range(N)]


def kinds(e_now: pl.DataFrame, e_before: pl.DataFrame, j_now: pl.DataFrame | None = None,
          j_before: pl.DataFrame | None = None, **params: Any) -> dict[str, Alert]:
    found = compute_alerts(e_now, e_before, j_now if j_now is not None else judged(BASE_SCORES),
                           j_before if j_before is not None else judged(BASE_SCORES),
                           AlertParams(n_boot=500, **params))
    return {a.kind: a for a in found}


def test_unchanged_run_has_no_alerts() -> None:
    assert kinds(essays(), essays()) == {}


def test_quality_drop_whose_ci_excludes_zero_beyond_threshold_fires() -> None:
    now = judged([s - 8 for s in BASE_SCORES])
    alert = kinds(essays(), essays(), now)["quality_drop"]
    assert alert.severity == "critical" and alert.judge == "judge"
    assert alert.before is not None
    assert alert.now == pytest.approx(alert.before - 8)
    assert "CI [" in alert.message and "20 common prompts" in alert.message


def test_quality_change_within_noise_or_below_threshold_does_not_fire() -> None:
    # Mean -1 with a spread of ±6 per prompt: the CI contains 0.
    noisy = judged([s + (6 if i % 2 else -8) for i, s in enumerate(BASE_SCORES)])
    assert "quality_drop" not in kinds(essays(), essays(), noisy)
    # A real but small drop (-1.0 on every prompt: CI excludes 0) under the 2-point threshold.
    small = judged([s - 1 for s in BASE_SCORES])
    assert "quality_drop" not in kinds(essays(), essays(), small)
    assert "quality_drop" in kinds(essays(), essays(), small, quality_drop=0.5)


def test_length_rate_increases() -> None:
    short = kinds(essays("门" * 30), essays())
    assert short["under_length"].now == 1.0 and short["under_length"].before == 0.0
    assert "violation" in short and "over_length" not in short
    long = kinds(essays("门" * 400), essays())
    assert "over_length" in long and "under_length" not in long
    # 1 of 20 essays short: +5 points, below the 10-point threshold.
    one = essays(texts=["门" * 30, *[GOOD] * (N - 1)])
    assert "under_length" not in kinds(one, essays())


def test_truncated_essays_are_violations() -> None:
    found = kinds(essays(finish="length"), essays())
    assert found["violation"].now == 1.0 and "under_length" not in found


def test_off_language_essays() -> None:
    english = "The door opened and I walked into the quiet morning. " * 3
    assert is_off_language(english) and not is_off_language(GOOD + " AI")
    alert = kinds(essays(english), essays())["off_language"]
    assert alert.severity == "critical" and alert.now == 1.0
    # 1 of 20 (5%) at the default threshold fires; at 10% it does not.
    one = essays(texts=[english, *[GOOD] * (N - 1)])
    assert "off_language" in kinds(one, essays())
    assert "off_language" not in kinds(one, essays(), off_language_rate=0.1)


def test_failure_rate_increase() -> None:
    found = kinds(essays(n_failed=4), essays())
    assert found["failure_rate"].now == pytest.approx(0.2)
    assert "failure_rate" not in kinds(essays(n_failed=1), essays(), failure_rate_increase=0.1)


def test_p95_latency_increase() -> None:
    found = kinds(essays(latency=3.0), essays(latency=1.0))
    p95 = found["p95_latency"]
    assert p95.now is not None and p95.before is not None
    assert p95.now > 3.0 and p95.before < 1.3
    assert "p95_latency" not in kinds(essays(latency=1.2), essays(latency=1.0))
    # Twice a fast endpoint's p95 (0.38 → 0.78 s) is under the 1 s floor: noise, not an alert ...
    assert "p95_latency" not in kinds(essays(latency=0.6), essays(latency=0.2))
    # ... unless the floor is lowered.
    assert "p95_latency" in kinds(essays(latency=0.6), essays(latency=0.2),
                                  p95_latency_min_s=0.01)


def test_cost_per_1k_chars_increase() -> None:
    metrics = model_metrics(essays(cost=0.002))["writer"]
    assert metrics.cost_per_1k_chars == pytest.approx(0.002 * N / (100 * N) * 1000)
    assert "cost_per_1k_chars" in kinds(essays(cost=0.002), essays(cost=0.001))
    assert "cost_per_1k_chars" not in kinds(essays(cost=0.0011), essays(cost=0.001))
    # Free models (no price) have no cost to compare.
    assert "cost_per_1k_chars" not in kinds(essays(cost=None), essays(cost=None))


def test_returned_model_id_change_under_a_pinned_name() -> None:
    found = kinds(essays(returned="writer-2025-06"), essays(returned="writer-2025-01"))
    assert "writer-2025-06" in found["model_id_changed"].message
    assert "model_id_changed" not in kinds(essays(returned="writer-2025-06"),
                                           essays(returned="writer-2025-01"),
                                           model_id_change=False)
    judge = kinds(essays(), essays(), judged(BASE_SCORES, "judge-v2"))
    assert "judge_id_changed" in judge


def test_records_round_trip_and_lines() -> None:
    found = compute_alerts(essays("门" * 30), essays(), judged(BASE_SCORES),
                           judged(BASE_SCORES), AlertParams())
    assert alerts_of_frame(alerts_frame(found)) == found
    # Shorter essays at the same price per call cost more per character, too.
    assert {a.kind for a in found} == {"under_length", "violation", "cost_per_1k_chars"}
    lines = alert_lines(found, "r2", "r1", None)
    assert lines[0] == "alerts: run r2 vs r1: 3 alert(s)" and len(lines) == 4
    assert alert_lines([], "r2", None, "no earlier run") == [
        "alerts: run r2: no comparable run (no earlier run)"]


def test_webhook_urls_are_validated_and_shown_without_their_path() -> None:
    with pytest.raises(ValueError, match="not an http"):
        AlertParams(webhooks=("ftp://example.com/x",))
    assert shown_url("https://hooks.slack.com/services/T0/B0/secret") == \
        "https://hooks.slack.com/…"
    assert shown_url("http://127.0.0.1:8080") == "http://127.0.0.1:8080"


def test_the_alerts_section_of_the_benchmark_config_is_strict(tmp_path: Path) -> None:
    base = "generate: {models: [w]}\njudge: {judges: [j]}\n"
    good = tmp_path / "good.yaml"
    good.write_text(base + "alerts: {quality_drop: 3, webhooks: ['http://127.0.0.1:9/h']}\n",
                    encoding="utf-8")
    config = load_benchmark_config(good)
    assert config.alerts.quality_drop == 3 and config.alerts.webhooks == ("http://127.0.0.1:9/h",)
    assert load_benchmark_config(_write(tmp_path, base)).alerts == AlertParams()
    with pytest.raises(BenchmarkConfigError, match="quality_drp"):
        load_benchmark_config(_write(tmp_path, base + "alerts: {quality_drp: 3}\n"))


def _write(folder: Path, text: str) -> Path:
    path = folder / f"c{abs(hash(text))}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def steered(scores: list[float], n_flagged: int, first: float, second: list[float]
            ) -> pl.DataFrame:
    """``scores``, but the first ``n_flagged`` essays addressed the judge: flagged, the
    first judge gave ``first``, the second judge ``second`` (per prompt)."""
    rows = judged(scores).with_row_index("i")
    hit = pl.col("i") < n_flagged
    return rows.with_columns(
        pl.when(hit).then(pl.lit(first)).otherwise(pl.col("score_weighted"))
        .alias("score_weighted"),
        pl.when(hit).then(pl.lit('["instruction"]')).otherwise(pl.lit("[]"))
        .alias("essay_flags"),
        pl.when(hit).then(pl.lit("ok")).alias("second_status"),
        pl.when(hit).then(pl.Series(second, dtype=pl.Float64)).alias("second_score"),
        pl.when(hit).then(pl.lit("judge-2")).alias("second_judge")).drop("i")


def quality(now: pl.DataFrame, flagged: FlaggedRule) -> set[str]:
    found = compute_alerts(essays(), essays(), now, judged(BASE_SCORES),
                           AlertParams(n_boot=500), flagged)
    return {a.kind for a in found if a.kind.startswith("quality")}


def test_flagged_essays_count_by_the_runs_rule_so_a_steered_judge_hides_no_drop() -> None:
    # This week the writer got worse by 8 on every prompt, and 12 of its 20 essays told
    # the first judge to give full marks (it obeyed); the second judge saw the drop.
    worse = [s - 8 for s in BASE_SCORES]
    now = steered(worse, 12, first=100.0, second=worse)
    assert quality(now, "second_opinion") == {"quality_drop"}
    assert quality(now, "first_judge") == set()  # the obeyed 100s mask the drop
    # exclude: the 8 clean essays alone show the drop.
    assert quality(now, "exclude") == {"quality_drop"}


def test_other_scores_than_the_main_one_are_compared_as_stored() -> None:
    now = steered(BASE_SCORES, 12, first=100.0, second=[10.0] * N).with_columns(
        pl.col("score_weighted").alias("score_unweighted"))
    before = judged(BASE_SCORES).with_columns(pl.col("score_weighted")
                                              .alias("score_unweighted"))
    found = compute_alerts(essays(), essays(), now, before,
                           AlertParams(n_boot=500, score="score_unweighted"), "second_opinion")
    # The second opinion (10) would be a drop; score_unweighted keeps the first judge's.
    assert "quality_drop" not in {a.kind for a in found}
