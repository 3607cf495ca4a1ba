"""Fresh calls per run, reuse within a run's lineage: runs recorded in the catalog, the
stages run as the pipeline runs them (``run_stages``), calls counted at the fake server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.drift import DriftParams
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.runs.lineage import lineage_upstream, run_scope
from essaybench.stages.pipeline import BENCHMARK_STAGES, resolve_upstream, run_stages
from essaybench.store import Snapshot, Store
from essaybench.store.runs import get_run, record_run

# The call arithmetic below is about the run's own calls: no anchor re-judging ...
CONFIG = BenchmarkConfig(per_genre=2, generate=GenerateParams(models=("writer",)),
                         judge=JudgeParams(judges=["judge"]), drift=None)
# per_genre 2 on the bundled set: 8 prompts of the four genres and 2 that leave the genre
# to the essay (kept by configs/curate.yaml), whose essays' genre the judge is asked first.
ESSAYS, GENRE_CALLS = 10, 2
CALLS = 2 * ESSAYS + GENRE_CALLS  # 10 essays + 10 judgments + 2 genre calls
GENRE_TAG = "#genre"  # the tag suffix of a genre call (bench/judge/genre.py)
# ... except in the week-over-week test: the anchors are re-judged every week too.
WEEKLY = CONFIG.model_copy(update={"drift": DriftParams(anchors=4, min_anchors=4)})
WEEKLY_CALLS = CALLS + 4


def use_fake_models(path: Path, base_url: str, monkeypatch: pytest.MonkeyPatch,
                    **overrides: Any) -> None:
    """$ESSAYBENCH_MODELS: `writer` and `judge` on the fake server (judge: no retries)."""
    entry = {"provider": "fake", "base_url": base_url, "family": "fake",
             "structured_output": "json_schema", "max_concurrency": 4, "timeout_s": 10,
             **overrides}
    path.write_text(yaml.safe_dump({"models": {
        "writer": {**entry, "model_id": "writer"},
        "judge": {**entry, "model_id": "judge", "max_retries": 0}}}), encoding="utf-8")
    monkeypatch.setenv("ESSAYBENCH_MODELS", str(path))


def run(store: Store, run_id: str, *, base_run: str | None = None, from_stage: str = "generate",
        reuse_from: str | None = None,
        config: BenchmarkConfig = CONFIG) -> dict[str, Snapshot]:
    """What the pipeline flow does: record the run, then generate (or the rerun's first
    stage, reading ``base_run``'s snapshot along its lineage) → judge → aggregate."""
    record_run(store, run_id, base_run=base_run, from_stage=from_stage, reuse_from=reuse_from)
    upstream = resolve_upstream(store, from_stage, base_run) if base_run is not None else None
    stages: Sequence[str] = BENCHMARK_STAGES[BENCHMARK_STAGES.index(from_stage):]
    return run_stages(store, run_id, config, stages, upstream)


def judge_keys(store: Store, run_id: str, status: str | None = None) -> set[str]:
    """The keys of the run's judge-stage calls (with that status; any when None)."""
    return set(judge_calls(store, run_id, status))


def judge_calls(store: Store, run_id: str, status: str | None = None) -> dict[str, str]:
    """key → tag of the run's judge-stage calls (with that status; any when None)."""
    with duckdb.connect(str(store.root / "ledger.duckdb"), read_only=True) as con:
        rows = con.execute("select key, tag from llm_calls where run_id = ? and stage = 'judge' "
                           "and (? is null or status = ?)", [run_id, status, status]).fetchall()
    return dict(rows)


def genre_calls(calls: dict[str, str]) -> int:
    return sum(tag.endswith(GENRE_TAG) for tag in calls.values())


def sent(server: FakeServerHandle) -> dict[str, int]:
    per_model = server.stats().per_model
    return {m: per_model[m].received if m in per_model else 0 for m in ("writer", "judge")}


@pytest.fixture
def store(curated_copy: Store) -> Store:
    (curated_copy.root / "ledger.duckdb").unlink(missing_ok=True)
    return curated_copy


def test_two_runs_of_one_config_send_every_call_twice(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with run_fake_server() as server:
        use_fake_models(tmp_path / "models.yaml", server.base_url, monkeypatch)
        one = run(store, "w1", config=WEEKLY)
        assert server.stats().totals.received == WEEKLY_CALLS
        two = run(store, "w2", config=WEEKLY)
        stats = server.stats()
    assert stats.totals.received == 2 * WEEKLY_CALLS  # week 2 does not replay week 1
    assert {k: n for k, n in stats.received_per_key.items() if n} == {"2": WEEKLY_CALLS}
    assert two["drift"].read().height == 4
    assert list(two["drift"].upstream_snapshot_ids) == [two["judge"].snapshot_id]
    assert not two["judge"].read()["from_ledger"].any()
    assert one["aggregate"].read().height == two["aggregate"].read().height == 1
    w2 = get_run(store, "w2")
    assert w2 is not None and (w2.kind, w2.reuse_scope) == ("run", ("w2",))


def test_reruns_reuse_their_lineage_and_reuse_from_lends_a_run(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The judge fails about half of the first two arrivals of each request, a different
    # half each time (the decision hashes the attempt): run 1 and run 2 fail different
    # judgments; a third arrival succeeds. A genre call that fails leaves its essay's
    # judgment unasked: the run that next gets its genre asks it (a first arrival).
    scenario = FakeScenario.model_validate({"faults": [
        {"kind": "status", "status": 503, "first_attempts": 2, "rate": 0.5, "seed": 4,
         "models": ["judge"]}]})
    with run_fake_server(scenario) as server:
        use_fake_models(tmp_path / "models.yaml", server.base_url, monkeypatch)
        run(store, "r1")
        failed_1 = judge_calls(store, "r1", "api_error")
        run(store, "r2")
        failed_2 = judge_calls(store, "r2", "api_error")
        assert failed_1.keys() != failed_2.keys()
        # seeded: run 1 fails both genre calls (8 judgments + 2 genre calls sent), run 2
        # one (8 + 2 + the judgment of the essay whose genre came back)
        assert (genre_calls(failed_1), genre_calls(failed_2)) == (2, 1)
        assert [len(judge_keys(store, r)) for r in ("r1", "r2")] == [10, 11]
        assert 0 < len(failed_2) < 11
        assert sent(server) == {"writer": 2 * ESSAYS, "judge": 10 + 11}

        # A rerun of run 2 sends exactly run 2's failures, not run 1's, and the judgment
        # of the essay whose genre call run 2 failed; that one, a first arrival, fails.
        before = sent(server)
        r3 = run(store, "r3", base_run="r2", from_stage="judge")
        assert sent(server) == {"writer": before["writer"],
                                "judge": before["judge"] + len(failed_2) + 1}
        assert judge_keys(store, "r3", "ok") == failed_2.keys()
        [(new_key, new_tag)] = judge_calls(store, "r3", "api_error").items()
        assert new_key not in judge_keys(store, "r2")
        assert new_tag + GENRE_TAG in failed_2.values()
        assert r3["judge"].read()["status"].value_counts(sort=True).rows() == [
            ("ok", ESSAYS - 1), ("api_error", 1)]

        # A rerun of that rerun sends that judgment again (a second arrival: seeded, ok);
        # reruns of it, from generate and from aggregate, send nothing new, and the essays
        # are run 2's (the rerun of a rerun follows the lineage).
        before = sent(server)
        r4 = run(store, "r4", base_run="r3", from_stage="judge")
        assert sent(server) == {"writer": before["writer"], "judge": before["judge"] + 1}
        assert judge_calls(store, "r4") == {new_key: new_tag}
        assert set(r4["judge"].read()["status"]) == {"ok"}
        before = sent(server)
        r5 = run(store, "r5", base_run="r4", from_stage="generate")
        run(store, "r6", base_run="r5", from_stage="aggregate")
        assert sent(server) == before
        assert r4["judge"].upstream_snapshot_ids == r3["judge"].upstream_snapshot_ids
        r2_essays = lineage_upstream(store, "judge", "generate", "r2").read()
        assert r5["generate"].read()["essay_text"].equals(r2_essays["essay_text"])
        assert set(r5["judge"].read()["status"]) == {"ok"}
        assert run_scope(store, "r5").runs == frozenset({"r5", "r4", "r3", "r2"})

        # A new run told to reuse run 1 is served run 1's successes: it sends only the
        # calls run 1 failed, and the judgments run 1 could not ask for want of a genre.
        before = sent(server)
        run(store, "r7", reuse_from="r1")
        assert sent(server) == {"writer": before["writer"],
                                "judge": before["judge"] + len(failed_1)
                                + genre_calls(failed_1)}
        assert failed_1.keys() < judge_keys(store, "r7", "ok")
        # ... and without --reuse-from a new run pays for everything again.
        before = sent(server)
        run(store, "r8")
        assert sent(server) == {"writer": before["writer"] + ESSAYS,
                                "judge": before["judge"] + ESSAYS + GENRE_CALLS}


def test_rerun_from_generate_writes_the_base_runs_prompts(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The prompt set version and sample come from the base run's generate stage, not
    from the config (here: another sample, and a prompt set that does not exist)."""
    with run_fake_server() as server:
        use_fake_models(tmp_path / "models.yaml", server.base_url, monkeypatch)
        first = run(store, "g1")
        other = CONFIG.model_copy(update={"prompt_set": "ps-nowhere", "per_genre": 3,
                                          "sample_seed": 7})
        again = run(store, "g2", base_run="g1", config=other)
        assert server.stats().totals.received == CALLS  # all served from g1's calls
    prompts = first["generate"].read()["prompt_id"].sort()
    assert again["generate"].read()["prompt_id"].sort().equals(prompts)
    assert again["generate"].upstream_snapshot_ids == first["generate"].upstream_snapshot_ids


def test_missing_upstream_along_the_lineage_is_one_line_naming_run_and_stage(
        store: Store) -> None:
    with pytest.raises(LookupError, match="no run 'nope'"):
        resolve_upstream(store, "judge", "nope")
    # A run whose generate stage failed: its rerun from judge has no essays to read, and
    # its rerun of a rerun neither (the error names the run that lacks them).
    record_run(store, "f1")
    failed = store.start_stage_run("f1", "generate", [], {}, "test")
    store.finish_stage_run(failed, status="failed", error="boom")
    record_run(store, "f2", base_run="f1", from_stage="aggregate")
    for base in ("f1", "f2"):
        with pytest.raises(LookupError) as err:
            resolve_upstream(store, "judge", base)
        assert str(err.value).count("\n") == 0
        assert "run f1: its 'generate' stage did not succeed" in str(err.value)
    with pytest.raises(LookupError, match="no run 'ghost'"):
        record_run(store, "f3", reuse_from="ghost")


def test_a_rerun_of_a_run_from_before_runs_were_recorded_may_reuse_unattributed_calls(
        store: Store) -> None:
    """Its calls carry no run id: which of them it paid for is unknown, so its rerun (and
    only a run continuing or reusing it) is served the unattributed calls."""
    started = store.start_stage_run("old", "generate", [], {}, "test")
    store.finish_stage_run(started, status="failed", error="boom")
    record_run(store, "new", base_run="old", from_stage="generate")
    record_run(store, "fresh")
    new, fresh = run_scope(store, "new"), run_scope(store, "fresh")
    assert new.runs == frozenset({"new", "old"}) and new.unattributed and new.allows(None)
    assert not fresh.unattributed and not fresh.allows(None) and not fresh.allows("old")


# -- kill -9 in the middle of a run, resumed as a rerun ---------------------------------

CHILD = """
import sys
sys.path.insert(0, sys.argv[3])
from essaybench.bench.config import load_benchmark_config
from essaybench.stages.pipeline import run_stages
from essaybench.store import Store
from essaybench.store.runs import record_run

store = Store(sys.argv[1])
record_run(store, "killed")
run_stages(store, "killed", load_benchmark_config(sys.argv[2]), ["generate", "judge"], None)
print("DONE", flush=True)
"""


@pytest.mark.slow
def test_a_killed_run_resumed_as_a_rerun_pays_for_nothing_twice(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "benchmark.yaml"
    # drift off, as in CONFIG (the resumed run's): otherwise the anchors' calls, sent with
    # the first essay's, are in flight at the kill and the resumed run has none to resend.
    config.write_text(yaml.safe_dump({"per_genre": 6, "generate": {"models": ["writer"]},
                                      "judge": {"judges": ["judge"]}, "drift": None}),
                      encoding="utf-8")
    scenario = FakeScenario.model_validate({"models": {"*": {"latency_ms": 80}}})
    with run_fake_server(scenario) as server:
        use_fake_models(tmp_path / "models.yaml", server.base_url, monkeypatch,
                        max_concurrency=2)
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(store.root), str(config), str(PROJECT_ROOT)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=PROJECT_ROOT,
            env={**os.environ})
        deadline = time.monotonic() + 120
        while server.stats().totals.completed < 16:
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the run made no progress"
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        with duckdb.connect(str(store.root / "ledger.duckdb"), read_only=True) as con:
            paid = {k for (k,) in con.execute(
                "select key from llm_calls where run_id = 'killed' and status = 'ok'"
            ).fetchall()}
        assert paid  # some calls finished and were committed before the kill
        received_before = server.stats().totals.received

        resumed = run(store, "resumed", base_run="killed",
                      config=CONFIG.model_copy(update={"per_genre": 1}))
        per_key = server.stats(per_key=True).per_key
        total = server.stats().totals.received
    assert per_key is not None
    twice = sum(1 for counts in per_key.values() if counts.received == 2)
    assert max(counts.received for counts in per_key.values()) <= 2
    # The killed run sent received_before calls; those committed (paid) are never sent
    # again; only those in flight or awaiting their commit when the kill came are.
    assert twice == received_before - len(paid)
    # per_genre 6: 24 prompts of the four genres and the bundled set's 3 open-genre ones;
    # 27 essays + 27 judgments + 3 genre calls in all
    assert total - received_before == 57 - len(paid)
    essays = resumed["generate"].read()
    assert essays.height == 27 and set(essays["status"]) == {"ok"}  # the killed run's 27
    assert essays["genre"].null_count() == 3
    assert set(resumed["judge"].read()["status"]) == {"ok"}
