"""Adaptive sampling in the weekly run's stages (stages/adaptive.py), on the bundled prompt
set and the fake server, whose judge scores the three writers by fixed, far-apart
patterns (tests/stages/adaptive_fixtures.py). Expected decisions are recomputed with the
library's ``decide`` from the judge snapshot's Parquet file read by DuckDB."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import duckdb
import numpy as np
import pytest

from essaybench.bench.adaptive import decide
from essaybench.bench.adaptive_order import SamplingParams
from essaybench.bench.config import BenchmarkConfig, select_prompts
from essaybench.core.errors import UserError
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.stages.adaptive import AdaptiveSampler
from essaybench.stages.generate import prompt_set_input
from essaybench.stages.pipeline import refuse_adaptive, run_stages
from essaybench.store import Snapshot, Store
from essaybench.store.run_stage import StageFailed
from essaybench.store.runs import record_run
from tests.helpers import copy_store
from tests.stages.adaptive_fixtures import LEVELS, MARKS, config_yaml, registry, scenario

pytestmark = pytest.mark.slow
SAMPLING = {"mode": "adaptive", "round_size": 4, "floor_per_stratum": 1}
WRITERS = list(MARKS)


def _config(**sampling: object) -> BenchmarkConfig:
    return BenchmarkConfig.model_validate(config_yaml({**SAMPLING, **sampling}))


def _run(store: Store, run_id: str, config: BenchmarkConfig,
         levels: dict[str, int] = LEVELS) -> tuple[dict[str, Snapshot], dict[str, int]]:
    with run_fake_server(scenario(levels)) as server:
        snaps = run_stages(store, run_id, config, ["generate", "judge", "aggregate"], None,
                           registry=registry(server.base_url))
        return snaps, {m: s.received for m, s in server.stats().per_model.items()}


def _scores_duckdb(judged: Snapshot, prompts: list[str]) -> np.ndarray:
    """Per-prompt mean ok score of each writer, read from the judge snapshot's file."""
    relation = duckdb.sql(
        f"SELECT prompt_id, model, avg(score_weighted) FROM read_parquet('{judged.path}') "
        "WHERE status = 'ok' AND score_weighted IS NOT NULL GROUP BY ALL")
    assert relation is not None  # None only for a statement that returns no rows
    rows = relation.fetchall()
    out = np.full((len(prompts), len(WRITERS)), np.nan)
    for pid, model, mean in rows:
        if pid in prompts:
            out[prompts.index(pid), WRITERS.index(model)] = mean
    return out


def test_adaptive_samples_fewer_prompts_and_records_its_decisions(curated_copy: Store,
                                                                  tmp_path: Path) -> None:
    full_store = copy_store(curated_copy, tmp_path / "full")
    _, full_calls = _run(full_store, "full", _config(mode="full"))
    snaps, calls = _run(curated_copy, "r1", _config())
    decisions = snaps["adaptive"]
    meta = decisions.meta or {}
    sampled = list(meta["sampled_prompts"])
    assert meta["stop"] == "all_decided" and meta["sampled"] == len(sampled)
    # writers called for the sampled prompts only, once each; far fewer than the full run
    assert {w: calls[w] for w in WRITERS} == dict.fromkeys(WRITERS, len(sampled))
    assert all(calls[w] < full_calls[w] / 2 for w in WRITERS)
    essays = snaps["generate"].read()
    assert set(essays["prompt_id"]) == set(sampled)
    # the floor: every genre × set stratum of the selection has ≥ 1 sampled prompt
    _, prompts, _ = prompt_set_input(curated_copy, "latest")
    strata = {str(p): f"{g}/{s}" for p, g, s in select_prompts(prompts, None, 0)
              .select("prompt_id", "genre", "prompt_set").iter_rows()}
    assert set(Counter(strata[p] for p in sampled)) == set(strata.values())
    # the decisions equal decide() on the stored scores, rounds as recorded
    ends = [r["n_prompts"] for r in meta["rounds"]]
    expect = decide(_scores_duckdb(snaps["judge"], sampled), WRITERS, round_ends=ends,
                    alpha=0.05)
    table = decisions.read()
    assert table.select("first", "second", "outcome", "decided_at_prompts").rows() == [
        (s.question.first, s.question.second, s.outcome.value, s.decided_at_prompts)
        for s in expect]
    assert set(table["outcome"]) == {"first_better"}  # a > b > c, as scripted
    assert set(table["stop"]) == {"all_decided"}


def _stages(store: Store, run_id: str, config: BenchmarkConfig,
            server: FakeServerHandle) -> tuple[dict[str, Snapshot], dict[str, int]]:
    """The run's stages against ``server`` (a rerun's ledger keys need the same URL):
    the snapshots and the calls the server received meanwhile, per model."""
    before = {m: s.received for m, s in server.stats().per_model.items()}
    snaps = run_stages(store, run_id, config, ["generate", "judge", "aggregate"], None,
                       registry=registry(server.base_url))
    return snaps, {m: s.received - before.get(m, 0)
                   for m, s in server.stats().per_model.items()}


def test_a_rerun_pays_nothing_and_a_killed_run_resumes_to_the_same_sample(
        curated_copy: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clean = copy_store(curated_copy, tmp_path / "clean")
    with run_fake_server(scenario()) as server:
        record_run(clean, "r1")
        clean_snaps, clean_calls = _stages(clean, "r1", _config(), server)
        # its rerun: every call served from the ledger, the same sample
        record_run(clean, "r2", base_run="r1", from_stage="generate")
        again, again_calls = _stages(clean, "r2", _config(), server)
        assert sum(again_calls.values()) == 0
        assert again["adaptive"].meta["sampled_prompts"] == \
            clean_snaps["adaptive"].meta["sampled_prompts"]
    # a run that dies in its third round, then is rerun (a new run continuing it); the
    # first round is asked twice (the probe that finds the baseline, then the loop's)
    real = AdaptiveSampler._round
    rounds = 0

    def dying(self: AdaptiveSampler, *args: object) -> object:
        nonlocal rounds
        rounds += 1
        if rounds == 4:  # the probe (round 1), rounds 1 and 2 (served, new), then 3
            raise RuntimeError("killed")
        return real(self, *args)  # type: ignore[arg-type]

    with run_fake_server(scenario()) as server:
        monkeypatch.setattr(AdaptiveSampler, "_round", dying)
        record_run(curated_copy, "k1")
        with pytest.raises(StageFailed, match="killed"):
            _stages(curated_copy, "k1", _config(), server)
        monkeypatch.undo()
        record_run(curated_copy, "k2", base_run="k1", from_stage="generate")
        snaps, calls = _stages(curated_copy, "k2", _config(), server)
    first_two = 2 * 4  # the prompts of the two rounds the killed run finished
    assert {w: calls[w] for w in WRITERS} == {w: clean_calls[w] - first_two for w in WRITERS}
    assert 0 < calls["judge"] < clean_calls["judge"]
    assert snaps["adaptive"].meta["sampled_prompts"] == \
        clean_snaps["adaptive"].meta["sampled_prompts"]
    assert snaps["adaptive"].read().equals(clean_snaps["adaptive"].read())
    assert {k: n for k, n in server_keys(curated_copy).items() if n > 1} == {}


def server_keys(store: Store) -> dict[str, int]:
    """Ledger rows per request key over every run: a key paid twice has 2."""
    with duckdb.connect(str(store.root / "ledger.duckdb"), read_only=True) as con:
        return dict(con.execute("SELECT key, count(*) FROM llm_calls WHERE status = 'ok' "
                                "GROUP BY key").fetchall())


def test_change_questions_compare_with_the_last_comparable_run(curated_copy: Store) -> None:
    """Week 1 full; week 2 adaptive, writer-b and writer-c scored lower: their changes
    are decided 'changed down', writer-a's (identical scores) 'no change' within ±5."""
    week1, _ = _run(curated_copy, "w1", _config(mode="full"))
    assert "adaptive" not in week1
    week2, _ = _run(curated_copy, "w2", _config(min_effect=5.0),
                    levels={**LEVELS, "writer-b": 3, "writer-c": 1})
    meta = week2["adaptive"].meta or {}
    assert meta["baseline"] == "w1" and meta["stop"] == "all_decided"
    assert meta["sampled"] < meta["of"]
    table = week2["adaptive"].read()
    change = {r["first"]: r["label"] for r in table.filter(table["kind"] == "change")
              .iter_rows(named=True)}
    assert change == {"writer-a": "no change", "writer-b": "changed down",
                      "writer-c": "changed down"}
    # independently: each change is this week's score minus week 1's on the same prompts
    sampled = list(meta["sampled_prompts"])
    now = _scores_duckdb(week2["judge"], sampled)
    before = _scores_duckdb(week1["judge"], sampled)
    expect = decide(now, WRITERS, round_ends=[r["n_prompts"] for r in meta["rounds"]],
                    alpha=0.05, min_effect=5.0, last=before)
    assert table.select("kind", "first", "outcome", "decided_at_prompts").rows() == [
        (s.question.kind.value, s.question.first, s.outcome.value, s.decided_at_prompts)
        for s in expect]


def test_full_mode_is_unchanged_and_sharded_or_partial_adaptive_runs_are_refused(
        curated_copy: Store) -> None:
    snaps, full_calls = _run(curated_copy, "f1", _config(mode="full"))
    assert full_calls["writer-a"] == snaps["generate"].read()["prompt_id"].n_unique()
    assert "adaptive" not in snaps
    assert "sampling" not in snaps["generate"].meta.get("params", {})
    with pytest.raises(UserError, match="cannot run sharded"):  # what the pipeline asks
        refuse_adaptive(["generate", "judge"], sharded=True)
    with pytest.raises(UserError, match="needs generate and judge"):
        run_stages(curated_copy, "s2", _config(), ["generate"], None,
                   registry=registry("http://x.invalid/v1"))


@pytest.mark.skipif("stop_per_model" not in SamplingParams.model_fields,
                    reason="the library's SamplingParams has no stop_per_model yet")
def test_stop_per_model_stops_a_decided_writer_and_keeps_the_rest(curated_copy: Store) -> None:
    """writer-b and writer-c score alike (their pair never separates): writer-a, whose
    questions are decided, stops being written and judged; the other two go on to
    max_prompts. The decisions still equal decide() on the stored scores (writer-a's
    missing prompts NaN)."""
    levels = {**LEVELS, "writer-c": LEVELS["writer-b"]}
    config = _config(stop_per_model=True, max_prompts=60)
    snaps, calls = _run(curated_copy, "p1", config, levels=levels)
    meta = snaps["adaptive"].meta or {}
    assert meta["stop"] == "max_prompts" and meta["sampled"] == 60
    assert calls["writer-b"] == calls["writer-c"] == 60
    assert calls["writer-a"] < 60
    essays = snaps["generate"].read()
    assert essays.filter(essays["model"] == "writer-a").height == calls["writer-a"]
    sampled = list(meta["sampled_prompts"])
    expect = decide(_scores_duckdb(snaps["judge"], sampled), WRITERS,
                    round_ends=[r["n_prompts"] for r in meta["rounds"]], alpha=0.05)
    table = snaps["adaptive"].read()
    assert table.select("first", "second", "outcome", "decided_at_prompts").rows() == [
        (s.question.first, s.question.second, s.outcome.value, s.decided_at_prompts)
        for s in expect]
    assert table.filter(table["first"] == "writer-b")["outcome"].to_list() == ["undecided"]


def test_after_an_adaptive_week_changes_are_decided_on_its_prefix(curated_copy: Store) -> None:
    """Week 1 adaptive (no baseline: pairs only, it stops early); week 2 adaptive asks the
    changes too: they can be paired only on week 1's prompts, so they are decided on that
    prefix and the pairs alone go on — the run does not sample every prompt for changes
    that can no longer move. Each part equals decide() on the stored scores."""
    config = _config(min_effect=5.0)
    week1, _ = _run(curated_copy, "w1", config)
    first = list(week1["adaptive"].meta["sampled_prompts"])
    week2, calls = _run(curated_copy, "w2", config,
                        levels={**LEVELS, "writer-c": LEVELS["writer-c"] + 4})
    meta = week2["adaptive"].meta or {}
    assert meta["baseline"] == "w1" and meta["changes_until"] == len(first)
    assert meta["stop"] == "all_decided" and meta["sampled"] < meta["of"]
    assert calls["writer-a"] == meta["sampled"]  # no prompt written twice
    sampled = list(meta["sampled_prompts"])
    assert sampled[:len(first)] == first
    table = week2["adaptive"].read()
    changes = table.filter(table["kind"] == "change")
    most_obs = changes["n_obs"].max()
    assert isinstance(most_obs, int) and most_obs <= len(first)
    now = _scores_duckdb(week2["judge"], sampled)
    before = _scores_duckdb(week1["judge"], sampled[:len(first)])
    ends = [r["n_prompts"] for r in meta["rounds"]]
    pairs = decide(now, WRITERS, round_ends=ends, alpha=0.05, min_effect=5.0)
    capped = [e for e in range(4, len(first), 4)] + [len(first)]
    moved = decide(now[:len(first)], WRITERS, round_ends=capped, alpha=0.05,
                   min_effect=5.0, last=before, ask="changes")
    assert table.select("kind", "first", "outcome", "decided_at_prompts").rows() == [
        (s.question.kind.value, s.question.first, s.outcome.value, s.decided_at_prompts)
        for s in (*pairs, *moved)]
    assert dict(changes.select("first", "label").rows())["writer-c"] == "changed up"


def test_a_first_round_cut_by_max_prompts_writes_no_more_than_that(
        curated_copy: Store) -> None:
    """max_prompts below round_size: the writers are called for max_prompts prompts (the
    probe that finds the baseline asks for the first round as the loop cuts it); a
    max_calls below one prompt's planned calls is one clear error."""
    snaps, calls = _run(curated_copy, "m1", _config(round_size=40, max_prompts=7))
    assert snaps["adaptive"].meta["sampled"] == 7 and snaps["adaptive"].meta["stop"] in (
        "max_prompts", "all_decided")
    assert {w: calls[w] for w in WRITERS} == dict.fromkeys(WRITERS, 7)
    with pytest.raises(StageFailed, match=r"sampling.max_calls 5 is less than one prompt's "
                                          r"planned calls \(6\)"):
        _run(curated_copy, "m2", _config(max_calls=5))
