"""The weekly pipeline under a real Prefect engine, with fake models behind the registry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
import yaml

from essaybench.bench.health import RunUnhealthy
from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_engine")]


def _use_fake_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base_url: str,
                       **overrides: object) -> None:
    """Point $ESSAYBENCH_MODELS at a registry of `writer` and `judge` on the fake server."""
    models = {m: {"provider": "fake", "base_url": base_url, "model_id": m, "family": "fake",
                  "structured_output": "json_schema", "max_concurrency": 4, "timeout_s": 10,
                  **overrides}
              for m in ("writer", "judge")}
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"models": models}), encoding="utf-8")
    monkeypatch.setenv("ESSAYBENCH_MODELS", str(path))


@pytest.fixture
def fake_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServerHandle]:
    with run_fake_server() as server:
        _use_fake_registry(tmp_path, monkeypatch, server.base_url)
        yield server


def _config(tmp_path: Path, drift: dict[str, int] | None) -> str:
    """10 essays (2 prompts of each genre, 2 that leave the genre to the essay), 10
    judgments, 2 genre calls and the anchors ``drift`` re-judges (None: drift off)."""
    path = tmp_path / "benchmark.yaml"
    path.write_text(yaml.safe_dump({
        "per_genre": 2, "generate": {"models": ["writer"]},
        "judge": {"judges": ["judge"]}, "drift": drift}), encoding="utf-8")
    return str(path)


def test_pipeline_then_rerun_of_judge_pays_nothing_twice(
    fake_models: FakeServerHandle, tmp_path: Path,
) -> None:
    from essaybench.flows.pipeline import pipeline_flow

    store = tmp_path / "store"
    config = _config(tmp_path, {"anchors": 4, "min_anchors": 4})
    first = pipeline_flow(config, str(PROJECT_ROOT / "configs" / "curate.yaml"), str(store))
    table5 = Path(first["reports"]) / "table5_weighted.md"
    assert table5.is_file() and "writer" in table5.read_text(encoding="utf-8")
    sent = fake_models.stats().totals.received
    assert sent == 26  # 10 essays + 10 judgments + 2 genre calls + 4 anchors re-judged

    again = pipeline_flow(config, str(PROJECT_ROOT / "configs" / "curate.yaml"), str(store),
                          False, "judge", first["run_id"])
    assert fake_models.stats().totals.received == sent
    with duckdb.connect(str(store / "catalog.duckdb"), read_only=True) as con:
        stages = con.execute("select stage from stage_runs where run_id = ? order by started_at",
                             [again["run_id"]]).fetchall()
    # The rerun re-judged the anchors too, served from the ledger like its judgments.
    assert [s for (s,) in stages] == ["judge", "drift", "aggregate", "stats", "alerts"]



def test_judging_fails_midway_then_rerun_judges_only_the_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from essaybench.flows.pipeline import pipeline_flow
    from essaybench.llm.fake.scenario import FakeScenario

    # The judge's first attempt at every call fails (503, no retries): judging "fails
    # midway". The attempt is the one sent while generating (prefetch); the judge stage of
    # the same run does not pay for it again, the rerun does. The essays of the 2 prompts
    # that leave the genre open are not prefetched: their genre calls fail in the run, and
    # their judgments, first asked by the rerun once their genre is known, in the rerun;
    # the rerun's rerun asks them again.
    scenario = FakeScenario.model_validate(
        {"faults": [{"kind": "status", "status": 503, "first_attempts": 1, "models": ["judge"]}]})
    with run_fake_server(scenario) as server:
        _use_fake_registry(tmp_path, monkeypatch, server.base_url, max_retries=0)
        store = tmp_path / "store"
        config, curate = _config(tmp_path, None), str(PROJECT_ROOT / "configs" / "curate.yaml")
        # No judgment succeeded: the run is below its coverage floor, a failed run.
        with pytest.raises(RunUnhealthy) as failed:
            pipeline_flow(config, curate, str(store))
        first = failed.value.health.run_id
        before = server.stats().per_model
        with pytest.raises(RunUnhealthy) as failed_again:
            pipeline_flow(config, curate, str(store), False, "judge", first)
        assert "writer × judge: 8/10 judged (80%): api_error (http_503) ×2" in str(
            failed_again.value)
        middle = server.stats().per_model
        again = pipeline_flow(config, curate, str(store), False, "judge",
                              failed_again.value.health.run_id)
        after = server.stats().per_model
    assert after["writer"].received == before["writer"].received == 10  # none written twice
    assert before["judge"].completed == 0 and before["judge"].received == 8 + 2
    # the 8 judgments and 2 genre calls again (ok), the 2 choice judgments for the first time
    assert middle["judge"].completed == 10 and middle["judge"].received == 10 + 12
    assert after["judge"].completed == 12 and after["judge"].received == 22 + 2
    with duckdb.connect(str(store / "catalog.duckdb"), read_only=True) as con:
        snap = con.execute("select snapshot_id from stage_runs where run_id = ? and "
                           "stage = 'judge'", [again["run_id"]]).fetchall()[0][0]
    import polars as pl

    judged = pl.read_parquet(next((store / "snapshots" / "judge").glob(f"{snap}.parquet")))
    assert set(judged["status"]) == {"ok"} and judged["score_weighted"].null_count() == 0
