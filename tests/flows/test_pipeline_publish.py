"""A run that publishes its store when it ends, under a real Prefect engine: to a folder and
to S3 (a moto server on loopback), from $ESSAYBENCH_PUBLISH_URL or the flow's
``publish_to``; a failed run is published too and reads as failed; a publish that fails
fails the flow run with one line, and ``essaybench rerun --publish`` exits with it.

One failed run (its judge down) is made per module; each test reruns its aggregate stage
(no LLM call) on a copy, with a coverage floor of 0 when it needs a run that succeeds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from essaybench.bench.health import RunUnhealthy
from essaybench.cli import app
from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.server import run_fake_server
from essaybench.runs.health import run_health
from essaybench.runs.publish import PUBLISH_URL_ENV, PublishFailed
from essaybench.store import Store
from essaybench.store.parts import PartStore
from essaybench.store.publish import read_manifest
from essaybench.store.pull import pull
from essaybench.store.run_stage import StageFailed
from tests.cli.test_errors import error_line
from tests.helpers import copy_store
from tests.s3_server import S3Env

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_engine")]

CURATE = str(PROJECT_ROOT / "configs" / "curate.yaml")


@dataclass(frozen=True)
class FailedRun:
    store: Store
    run_id: str
    registry: Path
    strict: str  # the run's config: the default coverage floor (the run is below it)
    lenient: str  # the same with a floor of 0: the same judgments make a good run


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory: pytest.TempPathFactory,
               prefect_engine: None) -> Iterator[FailedRun]:
    """A run whose judge was down: every stage wrote its rows, the run is below its floor."""
    from essaybench.flows.pipeline import pipeline_flow

    folder = tmp_path_factory.mktemp("failed-run")
    registry = folder / "models.yaml"
    configs = {}
    for name, health in (("strict", None), ("lenient", {"coverage_floor": 0.0})):
        path = folder / f"{name}.yaml"
        path.write_text(yaml.safe_dump({
            "per_genre": 1, "generate": {"models": ["writer"]}, "judge": {"judges": ["judge"]},
            "drift": None, **({"health": health} if health else {})}), encoding="utf-8")
        configs[name] = str(path)
    with run_fake_server() as server, pytest.MonkeyPatch.context() as env:
        common = {"provider": "fake", "family": "fake", "structured_output": "json_schema",
                  "max_concurrency": 4, "timeout_s": 30, "max_retries": 0}
        registry.write_text(yaml.safe_dump({"models": {
            "writer": {**common, "base_url": server.base_url, "model_id": "writer"},
            "judge": {**common, "base_url": "http://127.0.0.1:9/v1", "model_id": "judge"}}}),
            encoding="utf-8")
        env.setenv("ESSAYBENCH_MODELS", str(registry))
        env.delenv(PUBLISH_URL_ENV, raising=False)
        with pytest.raises(RunUnhealthy) as failed:
            pipeline_flow(configs["strict"], CURATE, str(folder / "store"))
    yield FailedRun(Store(folder / "store"), failed.value.health.run_id, registry,
                    configs["strict"], configs["lenient"])


@pytest.fixture
def run(failed_run: FailedRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FailedRun:
    """A private copy of the failed run's store, the registry in the environment."""
    monkeypatch.setenv("ESSAYBENCH_MODELS", str(failed_run.registry))
    monkeypatch.delenv(PUBLISH_URL_ENV, raising=False)
    store = copy_store(failed_run.store, tmp_path / "store")
    return FailedRun(store, failed_run.run_id, failed_run.registry, failed_run.strict,
                     failed_run.lenient)


def rerun_aggregate(run: FailedRun, config: str, **params: Any) -> dict[str, object]:
    from essaybench.flows.pipeline import pipeline_flow

    result: dict[str, object] = pipeline_flow(
        config, CURATE, str(run.store.root), False, "aggregate", run.run_id,
        over_budget_ok=True, **params)
    return result


def pulled(parts: PartStore, folder: Path) -> Store:
    pull(parts, folder)
    return Store(folder, read_only=True)


def stage_rows(store: Store, run_id: str) -> list[tuple[str, str]]:
    return sorted((r.stage, r.status) for r in store.stage_runs(run_id, 100))


def test_a_run_publishes_to_the_folder_in_the_environment_after_its_last_stage(
        run: FailedRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PUBLISH_URL_ENV, str(tmp_path / "shared"))
    result = rerun_aggregate(run, run.lenient)
    rerun_id = str(result["run_id"])
    published = result["published"]
    assert isinstance(published, dict) and published["url"] == str(tmp_path / "shared")
    assert published["uploaded"] > 0 and published["missing"] == []

    copy = pulled(PartStore(tmp_path / "shared"), tmp_path / "pulled")
    # Published after the last stage: every row the run wrote is in the shared catalog.
    rows = stage_rows(run.store, rerun_id)
    assert {stage for stage, _ in rows} == {"aggregate", "stats", "alerts"}
    assert stage_rows(copy, rerun_id) == rows
    health = run_health(copy, rerun_id)
    assert health is not None and health.ok
    assert (tmp_path / "pulled" / "reports" / rerun_id / "report.html").is_file()


def test_a_run_publishes_to_s3_given_as_a_parameter(run: FailedRun, s3: S3Env,
                                                    tmp_path: Path) -> None:
    result = rerun_aggregate(run, run.lenient, publish_to=s3.url("team"))
    published = result["published"]
    assert isinstance(published, dict) and published["url"] == s3.url("team")
    copy = pulled(PartStore(s3.url("team")), tmp_path / "pulled")
    assert stage_rows(copy, str(result["run_id"])) == stage_rows(run.store,
                                                                 str(result["run_id"]))


def test_a_failed_run_is_published_and_reads_as_failed(run: FailedRun,
                                                       tmp_path: Path) -> None:
    """The team sees the failed run's diagnostics; LATEST.json names the catalog, which
    says the run failed, and the earlier runs stay in it."""
    shared = PartStore(tmp_path / "shared")
    with pytest.raises(RunUnhealthy) as failed:
        rerun_aggregate(run, run.strict, publish_to=str(tmp_path / "shared"))
    rerun_id = failed.value.health.run_id
    manifest = read_manifest(shared)
    assert manifest is not None
    copy = pulled(shared, tmp_path / "pulled")
    health = run_health(copy, rerun_id)
    assert health is not None and not health.ok  # what `essaybench runs` prints in red
    assert stage_rows(copy, rerun_id) == stage_rows(run.store, rerun_id)
    assert stage_rows(copy, run.run_id) == stage_rows(run.store, run.run_id)
    assert (tmp_path / "pulled" / "reports" / rerun_id / "report.html").is_file()


def test_a_run_whose_stage_raised_is_published_and_still_fails(
        run: FailedRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import essaybench.flows.pipeline

    def broken_stats(run_id: str, *args: object) -> str:
        raise StageFailed(f"stage 'stats' of run {run_id} failed: ValueError: boom",
                          run_id, "stats")

    monkeypatch.setattr(essaybench.flows.pipeline, "stats_stage_task", broken_stats)
    with pytest.raises(StageFailed, match="boom"):
        rerun_aggregate(run, run.lenient, publish_to=str(tmp_path / "shared"))
    copy = pulled(PartStore(tmp_path / "shared"), tmp_path / "pulled")
    [rerun_id] = {r.run_id for r in run.store.stage_runs(limit=100)} - {run.run_id}
    assert [stage for stage, _ in stage_rows(copy, rerun_id)] == ["aggregate"]


def test_a_publish_that_fails_fails_the_flow_run_with_one_line(
        run: FailedRun, s3: S3Env) -> None:
    from essaybench.flows.pipeline import pipeline_flow

    missing = f"s3://{s3.bucket}-gone/team"
    state = pipeline_flow(run.lenient, CURATE, str(run.store.root), False, "aggregate",
                          run.run_id, over_budget_ok=True, publish_to=missing,
                          return_state=True)
    assert state.is_failed()
    error = state.result(raise_on_failure=False)
    assert isinstance(error, PublishFailed)
    message = state.message or ""
    assert "\n" not in message
    assert message.startswith("run ") and " finished, but " in message
    assert f"publishing its store to {missing} failed" in message
    assert f"bucket '{s3.bucket}-gone' does not exist" in message
    assert message.endswith(f"(publish it again with: essaybench store publish --store "
                            f"{run.store.root} --to {missing})")


def test_the_cli_takes_publish_and_exits_2_with_that_line(run: FailedRun, s3: S3Env) -> None:
    missing = f"s3://{s3.bucket}-gone/team"
    out = CliRunner().invoke(app, ["rerun", "--run", run.run_id, "--stage", "aggregate",
                                   "--config", run.lenient, "--store", str(run.store.root),
                                   "--publish", missing])
    line = error_line(out)
    assert line.startswith("error: run ") and f"publishing its store to {missing} " in line
    # the run itself is in the store, good
    rerun_id = line.removeprefix("error: run ").split(" ")[0]
    health = run_health(Store(run.store.root, read_only=True), rerun_id)
    assert health is not None and health.ok


def test_a_publish_url_it_cannot_take_stops_the_cli_before_any_work(
        run: FailedRun) -> None:
    before = stage_rows(run.store, run.run_id)
    out = CliRunner().invoke(app, ["rerun", "--run", run.run_id, "--stage", "aggregate",
                                   "--config", run.lenient, "--store", str(run.store.root),
                                   "--publish", "ftp://host/x"])
    assert "unsupported storage scheme 'ftp'" in error_line(out)
    assert len({r.run_id for r in run.store.stage_runs(limit=100)}) == 1
    assert stage_rows(run.store, run.run_id) == before
