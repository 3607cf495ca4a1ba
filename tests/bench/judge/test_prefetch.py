"""Judge while generating: the judge stage gets the prefetched calls, sending none again."""

from __future__ import annotations

import polars as pl
import pytest

from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.memo import PREFETCHED
from essaybench.bench.judge.prefetch import JudgePrefetch
from essaybench.bench.judge.reading import PREFETCHED_READS
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
# per_genre 2 on the bundled set, two writers: 16 essays of single-genre prompts, whose
# judge calls the prefetch sends, and 4 of the 2 prompts that leave the genre to the essay,
# never prefetched: the judge stage asks each one's genre (a call) before its judgment.
SINGLE, CHOICE = 16, 4
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
def test_judge_stage_resends_nothing_after_prefetch(curated_copy: Store, prefetch: bool) -> None:
    # A private copy of the curated store, so each case starts with an empty ledger.
    store = curated_copy
    (store.root / "ledger.duckdb").unlink(missing_ok=True)
    with run_fake_server(FakeScenario.model_validate({"models": WRITERS})) as server, open_gateway(
            _registry(), store.root, MODELS,  # type: ignore[arg-type]
            base_urls=dict.fromkeys(MODELS, server.base_url)) as session:
        PREFETCHED_READS.forget()
        gen = generate_stage(store, "r1", CONFIG, session, prefetch_judge=prefetch)
        after_generate = server.stats().per_model
        # each prefetched judgment read as it came back, for the judge stage to take
        read_early = len(PREFETCHED_READS)
        judged = judge_stage(store, "r1", CONFIG, gen, session)
        after_judge = server.stats().per_model
    n = gen.read().height
    assert n == SINGLE + CHOICE and gen.read()["genre"].null_count() == CHOICE
    judge_before = after_generate["judge"].received if "judge" in after_generate else 0
    assert judge_before == (SINGLE if prefetch else 0)
    # each essay judged once, whoever sent it, and each open/choice essay's genre asked once
    assert after_judge["judge"].received == n + CHOICE
    assert after_judge["writer-a"].received == after_generate["writer-a"].received
    table = judged.read()
    assert (table["genre_source"] == "judge").sum() == CHOICE
    # Prefetched results reach the judge stage in memory: they were sent by this run, not
    # served from an earlier one, so the judgments table is the same either way.
    assert not table["from_ledger"].any()
    assert set(table["status"]) == {"ok"}
    assert judged.meta["from_ledger"] == 0
    assert session.gateway.last_stats is not None
    # the stage's judgment batch (after its genre calls): the prefetched ones in memory
    assert session.gateway.last_stats.from_follow_ups == (SINGLE if prefetch else 0)
    assert session.gateway.last_stats.from_ledger == 0
    assert len(PREFETCHED) == 0  # the prefetch's requests were taken, the rest forgotten
    assert read_early == (SINGLE if prefetch else 0) and len(PREFETCHED_READS) == 0
    JUDGE_TABLES[prefetch] = table
    if prefetch:
        assert gen.meta["follow_ups"] == {"requests": SINGLE, "from_ledger": 0, "sent": SINGLE}
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
    assert 0 < failed < SINGLE and prefetched["ok"] == SINGLE - failed
    assert sent_before == SINGLE
    table = judged.read()
    single = table.filter(pl.col("genre_source") == "prompt")
    choice = table.filter(pl.col("genre_source") == "judge")
    assert (single.height, choice.height) == (SINGLE, CHOICE)
    # The stage sends nothing prefetched again, only what the prefetch could not send:
    # each open/choice essay's genre call, then a judgment of each whose genre came back.
    genre_ok = int((choice["genre_call_status"] == "ok").sum())
    assert sent_by_stage == CHOICE + genre_ok
    assert (single["status"] == "api_error").sum() == failed  # the prefetch's failures stand
    # seeded: the faults hit first arrivals of the stage's calls too (a genre failure is
    # the judgment's failure, with no judgment asked)
    choice_failed = choice.filter(pl.col("status") != "ok")
    assert 0 < genre_ok < CHOICE and choice_failed.height > CHOICE - genre_ok
    assert set(choice_failed["status"]) == {"api_error"}
    assert table.filter(pl.col("status") != "ok")["score_weighted"].null_count() == \
        failed + choice_failed.height
    assert not table["from_ledger"].any()  # in memory: the prefetch's, or sent by the stage
    # The rerun retries every failed call once (a second arrival: ok) and asks the
    # judgment of each essay whose genre call had failed (a first arrival; seeded: ok).
    genre_failed = CHOICE - genre_ok
    judgment_failed = choice_failed.height - genre_failed
    assert sent_by_rerun == failed + 2 * genre_failed + judgment_failed
    assert session.gateway.last_stats is not None  # the rerun's judgment batch
    assert session.gateway.last_stats.sent == failed + genre_failed + judgment_failed
    redone = rerun.read()
    assert set(redone["status"]) == {"ok"}
    # served from the ledger: every judgment the first run got
    assert redone["from_ledger"].sum() == (SINGLE - failed) + (CHOICE - choice_failed.height)


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
