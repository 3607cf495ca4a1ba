"""Judge while generating: the judge stage gets the prefetched calls, sending none again."""

from __future__ import annotations

import polars as pl
import pytest

from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.prefetch import JudgePrefetch
from essaybench.bench.judge.request import JudgeParams, build_judge_requests, load_scoring
from essaybench.llm.client import request_key
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.ledger import Ledger
from essaybench.llm.session import open_gateway
from essaybench.llm.types import CallStatus, ChatResult
from essaybench.stages.generate import generate_stage
from essaybench.stages.judge import judge_stage
from essaybench.store import Store
from tests.llm.conftest import fake_spec, registry_of

CONFIG = BenchmarkConfig(per_genre=2, generate=GenerateParams(models=("writer-a", "writer-b")),
                         judge=JudgeParams(judges=["judge"]))
MODELS = ["writer-a", "writer-b", "judge"]
# Each writer's essays differ, so every essay has its own judge call.
WRITERS = {"*": {"reply": "template", "template": "{model}写道：{prompt}"}}


def _registry(**judge: object) -> object:
    return registry_of(*(fake_spec(m, model_id=m, **(judge if m == "judge" else {}))
                         for m in MODELS))


def _judge_ledger_rows(ledger: Ledger) -> dict[str, int]:
    rows = ledger.query("select status, count(*) as n from llm_calls where stage = 'judge' "
                        "group by 1")
    return {str(r["status"]): int(r["n"]) for r in rows}


def test_prefetched_requests_are_the_judge_stage_requests() -> None:
    prompts = pl.DataFrame({"prompt_id": ["p1"], "text": ["描写家乡的秋天。"],
                            "genre": ["descriptive"], "prompt_set": ["open"]})
    params = JudgeParams(judges=["j1", "j2"])
    prefetch = JudgePrefetch.for_prompts(prompts, params)
    assert prefetch is not None
    from essaybench.bench.generate import build_requests

    [request] = build_requests(prompts, GenerateParams(models=("w",)))
    essay = ChatResult(key="k", model="w", status=CallStatus.OK, text="秋天的家乡……")
    essays = pl.DataFrame({"prompt_id": ["p1"], "model": ["w"], "sample_index": [0],
                           "genre": ["descriptive"], "prompt_set": ["open"],
                           "prompt_text": ["描写家乡的秋天。"], "essay_text": ["秋天的家乡……"],
                           "status": ["ok"]})
    expected = build_judge_requests(essays, params, load_scoring(params))
    assert prefetch(request, essay) == expected
    spec = fake_spec("j1")
    assert [request_key(spec, r) for r in prefetch(request, essay)] == \
        [request_key(spec, r) for r in expected]
    failed = ChatResult(key="k", model="w", status=CallStatus.API_ERROR)
    assert prefetch(request, failed) == []
    # An essay it cannot build judge calls for: none asked for, the reason kept.
    stranger = request.model_copy(update={"tag": "p-unknown#0"})
    assert prefetch(stranger, essay) == [] and prefetch.errors == [
        "p-unknown#0: KeyError: 'p-unknown'"]


JUDGE_TABLES: dict[bool, pl.DataFrame] = {}


@pytest.mark.parametrize("prefetch", [True, False])
def test_judge_stage_sends_nothing_after_prefetch(curated_copy: Store, prefetch: bool) -> None:
    # A private copy of the curated store, so each case starts with an empty ledger.
    store = curated_copy
    (store.root / "ledger.duckdb").unlink(missing_ok=True)
    with run_fake_server(FakeScenario.model_validate({"models": WRITERS})) as server, open_gateway(
            _registry(), store.root, MODELS,  # type: ignore[arg-type]
            base_urls=dict.fromkeys(MODELS, server.base_url)) as session:
        gen = generate_stage(store, "r1", CONFIG, session, prefetch_judge=prefetch)
        after_generate = server.stats().per_model
        judged = judge_stage(store, "r1", CONFIG, gen, session)
        after_judge = server.stats().per_model
    n = gen.read().height
    assert n == 16
    judge_before = after_generate["judge"].received if "judge" in after_generate else 0
    assert judge_before == (n if prefetch else 0)
    assert after_judge["judge"].received == n  # each essay judged once, whoever sent it
    assert after_judge["writer-a"].received == after_generate["writer-a"].received
    table = judged.read()
    # Prefetched results reach the judge stage in memory: they were sent by this run, not
    # served from an earlier one, so the judgments table is the same either way.
    assert not table["from_ledger"].any()
    assert set(table["status"]) == {"ok"}
    assert judged.meta["from_ledger"] == 0
    assert session.gateway.last_stats is not None
    assert session.gateway.last_stats.from_follow_ups == (n if prefetch else 0)
    assert session.gateway.last_stats.from_ledger == 0
    JUDGE_TABLES[prefetch] = table
    if prefetch:
        assert gen.meta["follow_ups"] == {"requests": n, "from_ledger": 0, "sent": n}
    if len(JUDGE_TABLES) == 2:  # both cases ran: prefetching changed nothing in the table
        assert JUDGE_TABLES[True].equals(JUDGE_TABLES[False])


def test_partial_prefetch_is_final_for_the_run_and_a_rerun_sends_exactly_the_missing(
    curated_copy: Store,
) -> None:
    store = curated_copy
    (store.root / "ledger.duckdb").unlink(missing_ok=True)
    # About half the judge calls fail on their first arrival (no retries): the prefetch
    # is partial; a second arrival succeeds.
    scenario = FakeScenario.model_validate({"models": WRITERS, "faults": [
        {"kind": "status", "status": 503, "first_attempts": 1, "rate": 0.5, "seed": 2,
         "models": ["judge"]}]})
    with run_fake_server(scenario) as server, open_gateway(
            _registry(max_retries=0), store.root, MODELS,  # type: ignore[arg-type]
            base_urls=dict.fromkeys(MODELS, server.base_url)) as session:
        gen = generate_stage(store, "r1", CONFIG, session, prefetch_judge=True)
        prefetched = _judge_ledger_rows(session.ledger)
        sent_before = server.stats().per_model["judge"].received
        # The same run's judge stage: every call was attempted once already; the
        # failures stand (no second payment in one run).
        judged = judge_stage(store, "r1", CONFIG, gen, session)
        sent_by_stage = server.stats().per_model["judge"].received - sent_before
        # A rerun of the judge stage (a new run) retries exactly the failures.
        rerun = judge_stage(store, "r2", CONFIG, gen, session)
        sent_by_rerun = (server.stats().per_model["judge"].received - sent_before
                         - sent_by_stage)
    failed = prefetched.get("api_error", 0)
    assert 0 < failed < 16 and prefetched["ok"] == 16 - failed and sent_before == 16
    assert sent_by_stage == 0
    table = judged.read()
    assert (table["status"] == "api_error").sum() == failed
    assert table.filter(pl.col("status") != "ok")["score_weighted"].null_count() == failed
    assert not table["from_ledger"].any()  # handed over in memory by the prefetch
    assert sent_by_rerun == failed
    assert session.gateway.last_stats is not None
    assert session.gateway.last_stats.sent == failed
    redone = rerun.read()
    assert set(redone["status"]) == {"ok"}
    assert redone["from_ledger"].sum() == 16 - failed


def test_an_error_kept_for_the_snapshot_meta_is_redacted(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """Issue 13, item 4: ``follow_ups.errors`` stored an exception's raw text."""
    prompts = pl.DataFrame({"prompt_id": ["p1"], "text": ["描写家乡的秋天。"],
                            "genre": ["descriptive"], "prompt_set": ["open"]})
    prefetch = JudgePrefetch.for_prompts(prompts, JudgeParams(judges=["j1"]))
    assert prefetch is not None

    def leaky(*args: object) -> list[object]:
        raise RuntimeError("upstream said: Incorrect API key provided: sk-live-0123456789abcdef")

    monkeypatch.setattr("essaybench.bench.judge.prefetch.essay_judge_requests", leaky)
    from essaybench.bench.generate import build_requests

    [request] = build_requests(prompts, GenerateParams(models=("w",)))
    essay = ChatResult(key="k", model="w", status=CallStatus.OK, text="秋天的家乡……")
    assert prefetch(request, essay) == []
    assert prefetch.errors == [f"{request.tag}: RuntimeError: upstream said: Incorrect API key "
                               "provided: [REDACTED]"]
