"""judge.skip_off_topic_below: an essay too far from its prompt's topic words is not
judged — it stays in the judge snapshot as ``skipped`` (error_kind ``essay_off_topic``,
no score), no judge call is sent for it (nor prefetched while generating), and an
on-topic essay is judged as before. Real stages on the fake server."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams, skipped_off_topic
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.stages.pipeline import BENCHMARK_STAGES, run_stages
from essaybench.store import Store
from essaybench.store.runs import record_run
from tests.stages.test_alerts_signals import SWAPPED
from tests.stages.test_alerts_stage import use_models

PROMPT = "以“家乡的秋天”为题，写一篇记叙文，不少于800字。"


def test_the_rule_reads_the_essay_against_its_prompt() -> None:
    params = JudgeParams(judges=["j"], skip_off_topic_below=0.03)
    on = {"prompt_text": PROMPT, "essay_text": "家乡的秋天，稻田一片金黄。"}
    off = {"prompt_text": PROMPT, "essay_text": "人工智能正在改变世界。"}
    bare = {"prompt_text": "写一篇作文", "essay_text": "人工智能正在改变世界。"}
    assert not skipped_off_topic(params, on) and skipped_off_topic(params, off)
    assert not skipped_off_topic(params, bare)  # nothing to check it against: judged
    assert not skipped_off_topic(JudgeParams(judges=["j"]), off)  # off by default


@pytest.mark.parametrize("scenario", [None, SWAPPED], ids=["on_topic", "off_topic"])
def test_off_topic_essays_are_skipped_not_scored_not_sent(
        curated_copy: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        scenario: FakeScenario | None) -> None:
    store = curated_copy
    (store.root / "ledger.duckdb").unlink(missing_ok=True)
    config = BenchmarkConfig(per_genre=1, generate=GenerateParams(models=("writer",)),
                             judge=JudgeParams(judges=["judge"], skip_off_topic_below=0.03),
                             drift=None)
    with run_fake_server(scenario) as server:
        use_models(tmp_path / "models.yaml", server.base_url, monkeypatch)
        record_run(store, "r1")
        run_stages(store, "r1", config, BENCHMARK_STAGES, None)
        counts = server.stats().per_model.get("judge")
        received = counts.received if counts is not None else 0
    essays = store.require_ok_snapshot("generate", "r1", "test").read()
    judged = store.require_ok_snapshot("judge", "r1", "test").read()
    ok_essays = essays.filter(pl.col("status") == "ok").height
    assert judged.height == essays.height > 0  # every essay accounted for
    if scenario is None:
        assert set(judged["status"]) == {"ok"} and received >= ok_essays
    else:
        assert set(judged["status"]) == {"skipped"}
        assert set(judged["error_kind"]) == {"essay_off_topic"}
        assert judged["score_weighted"].null_count() == judged.height
        assert received == 0
