"""A store with two weekly runs through every stage the report reads, built once per session.

``r1`` is the session's judged run (three writers, one judge, pairwise), then aggregated,
with its stats and alerts. ``r2`` judges the same prompts a week later on the fake server,
where one writer answers with hostile markup, one in English, and one fails now and then
(HTTP 400, not retried): so r2 has failures, off-language essays, alerts against r1, a
drift verdict (the judge's first calibration) and text the page must escape, in essays
and in error messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from essaybench.bench.alerts import AlertParams
from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.drift import DriftParams
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.bench.pairwise.design import PairwiseParams
from essaybench.bench.stats_tables import StatsParams
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.scope import ReuseScope
from essaybench.llm.session import open_gateway
from essaybench.report import write_report
from essaybench.stages.aggregate import aggregate_stage
from essaybench.stages.alerts import alerts_stage
from essaybench.stages.drift import drift_stage
from essaybench.stages.generate import generate_stage
from essaybench.stages.judge import judge_stage
from essaybench.stages.pairwise import pairwise_stage
from essaybench.stages.stats import stats_stage
from essaybench.store import Snapshot, Store
from tests.conftest import JudgedRun
from tests.helpers import JUDGED_FAMILIES, JUDGED_WRITERS, copy_store
from tests.llm.conftest import fake_spec, registry_of

HOSTILE = '<script>alert(1)</script></textarea>"onmouseover=alert(2) x=\''
HOSTILE_ERROR = "<img src=x onerror=alert(3)> bad request"  # a provider's error body
ENGLISH = "The door opened and I walked into the quiet morning, thinking of home."
STATS = StatsParams(n_boot=200, seed=3)
SMALL_CHUNKS = 3_000  # bytes: r2's 19 prompts in several chunk files
ALERTS = AlertParams(n_boot=200)
WEEK_2 = FakeScenario.model_validate({
    "models": {
        "qwen-writer": {"reply": "template", "template": HOSTILE + "{model}：{prompt}"},
        "gpt-writer": {"reply": "template", "template": ENGLISH + " ({model})"},
        "*": {"reply": "template", "template": "{model}：{prompt}"}},
    "faults": [{"kind": "status", "status": 400, "rate": 0.4, "seed": 1,
                "message": HOSTILE_ERROR, "models": ["deepseek-writer"]}]})


@dataclass(frozen=True)
class ReportedRuns:
    store: Store
    judged: dict[str, Snapshot]  # run → its judge snapshot


def _after_judging(store: Store, run_id: str, judged: Snapshot, pairs: Snapshot) -> None:
    aggregate_stage(store, run_id, judged)
    stats_stage(store, run_id, STATS, judged, pairs, JUDGED_FAMILIES)
    alerts_stage(store, run_id, ALERTS, judged)


@pytest.fixture(scope="session")
def reported_runs(judged_run: JudgedRun, tmp_path_factory: pytest.TempPathFactory
                  ) -> ReportedRuns:
    source, judged_r1, pairs_r1 = judged_run
    store = copy_store(source, tmp_path_factory.mktemp("reported") / "store")
    judged_r1 = store.get_snapshot(judged_r1.snapshot_id)
    _after_judging(store, "r1", judged_r1, store.get_snapshot(pairs_r1.snapshot_id))

    config = BenchmarkConfig(per_genre=4, generate=GenerateParams(models=JUDGED_WRITERS),
                             judge=JudgeParams(judges=["qwen-judge"]),
                             pairwise=PairwiseParams(judges=["qwen-judge"]),
                             drift=DriftParams(anchors=8, n_boot=200))
    models = [*JUDGED_WRITERS, "qwen-judge"]
    registry = registry_of(*(fake_spec(m, model_id=m, family=JUDGED_FAMILIES[m])
                             for m in models))
    with run_fake_server(WEEK_2) as server, open_gateway(
            registry, store.root, models, base_urls=dict.fromkeys(models, server.base_url),
            scope=ReuseScope.of_run("r2")) as session:  # a new week: fresh calls
        gen = generate_stage(store, "r2", config, session)
        judged_r2 = judge_stage(store, "r2", config, gen, session)
        assert config.drift is not None
        drift_stage(store, "r2", config, registry, session, judged_r2)
        assert config.pairwise is not None
        pairs_r2 = pairwise_stage(store, "r2", config.pairwise, gen, session)
    _after_judging(store, "r2", judged_r2, pairs_r2)
    return ReportedRuns(store, {"r1": judged_r1, "r2": judged_r2})


@pytest.fixture(scope="session")
def report_pages(reported_runs: ReportedRuns, tmp_path_factory: pytest.TempPathFactory
                 ) -> dict[str, Path]:
    """Both runs' report pages, written in a copy of ``reported_runs``'s store, their essays
    in chunks of a few prompts each (SMALL_CHUNKS), so the browser reads several."""
    store = copy_store(reported_runs.store, tmp_path_factory.mktemp("pages") / "store")
    return {run: write_report(store, run, chunk_bytes=SMALL_CHUNKS) for run in ("r1", "r2")}
