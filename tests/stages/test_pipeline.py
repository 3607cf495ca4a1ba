"""generate → judge → aggregate against the store, on the bundled prompt set, fake models."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pytest

from essaybench.bench.config import BenchmarkConfig, select_prompts
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.session import open_gateway
from essaybench.stages.aggregate import aggregate_stage
from essaybench.stages.generate import generate_stage
from essaybench.stages.judge import judge_stage
from essaybench.stages.pipeline import resolve_upstream, run_stages
from essaybench.store import Store
from tests.llm.conftest import fake_spec, registry_of

CONFIG = BenchmarkConfig(per_genre=2, generate=GenerateParams(models=("writer",)),
                         judge=JudgeParams(judges=["judge"]))
# per_genre 2 on the bundled set: 2 prompts of each genre and 2 of the fifth pool, the
# prompts that leave the genre to the essay (configs/curate.yaml keeps them: genre null).
# Each of their essays costs every judge one genre call before its judgment.
SINGLE, CHOICE = 8, 2


def test_select_prompts_is_seeded_and_balanced() -> None:
    prompts = pl.DataFrame({
        "prompt_id": [f"p{i}" for i in range(16)],
        "genre": ["argumentative", "narrative", "descriptive", "expository"] * 4,
        "prompt_set": ["open"] * 8 + ["constrained"] * 8})
    a = select_prompts(prompts, 2, seed=1)
    assert a.equals(select_prompts(prompts.reverse(), 2, seed=1))
    assert a.group_by("genre").len()["len"].to_list() == [2, 2, 2, 2]
    assert sorted(a.group_by("prompt_set").len().rows()) == [("constrained", 4), ("open", 4)]
    assert select_prompts(prompts, None, 0).equals(prompts)
    # Only some genres: each listed genre's sample is the one it gets with every genre.
    two = select_prompts(prompts, 2, seed=1, genres=("narrative", "expository"))
    assert two.equals(a.filter(pl.col("genre").is_in(["narrative", "expository"])))
    assert sorted(set(select_prompts(prompts, None, 0, genres=("narrative",))["genre"])) == [
        "narrative"]
    with pytest.raises(ValueError, match=r"unknown genres \['poem'\]"):
        BenchmarkConfig(generate=GenerateParams(models=("w",)),
                        judge=JudgeParams(judges=["j"]), genres=("poem",))


def test_benchmark_stages_and_rerun_of_judge(curated_copy: Store) -> None:
    store = curated_copy
    models = ["writer", "judge"]
    with run_fake_server() as server, open_gateway(
            registry_of(*(fake_spec(m, model_id=m) for m in models)), store.root, models,
            base_urls=dict.fromkeys(models, server.base_url)) as session:
        gen = generate_stage(store, "r1", CONFIG, session)
        judged = judge_stage(store, "r1", CONFIG, gen, session)
        agg, folder = aggregate_stage(store, "r1", judged)
        sent = server.stats().totals.received
        upstream = resolve_upstream(store, "judge", "r1")
        assert upstream is not None and upstream.snapshot_id == gen.snapshot_id
        again = judge_stage(store, "r2", CONFIG, upstream, session)
        assert server.stats().totals.received == sent  # nothing paid twice
    essays = gen.read()
    assert essays.height == SINGLE + CHOICE and set(essays["status"]) == {"ok"}
    assert essays["genre"].null_count() == CHOICE
    assert sent == 2 * (SINGLE + CHOICE) + CHOICE  # essays, judgments, genre calls
    assert again.read().drop("from_ledger").equals(judged.read().drop("from_ledger"))
    assert judged.read()["genre_source"].value_counts(sort=True).rows() == [
        ("prompt", SINGLE), ("judge", CHOICE)]
    t5 = agg.read()
    assert t5.height == 1 and t5["overall:n"][0] == SINGLE + CHOICE
    for name in ("table5_weighted", "table5_unweighted", "trait_means", "length_compliance",
                 "flags"):
        for ext in ("md", "csv", "parquet"):
            assert (folder / f"{name}.{ext}").is_file()
    # The fake judge's scores are seeded noise: no essay is flagged, every row is counted.
    flags = pl.read_parquet(folder / "flags.parquet")
    assert flags.select("model", "judge", "rows", "essays_flagged").rows() == [
        ("writer", "judge", SINGLE + CHOICE, 0)]


def test_repeated_judging_through_the_stages_prefetched_reported_and_rerun_free(
        curated_copy: Store) -> None:
    # judge.repeats 3 for every essay: the three calls of each essay of a single-genre
    # prompt go out while generating (prefetch); the judge stage sends only those of the
    # essays whose genre it must ask first (one genre call, then three judgments each);
    # the aggregate reports the spread, and a rerun of the judge stage pays for none of
    # them again.
    store = curated_copy
    config = CONFIG.model_copy(update={"judge": JudgeParams(judges=["judge"], repeats=3)})
    models = ["writer", "judge"]
    with run_fake_server() as server, open_gateway(
            registry_of(*(fake_spec(m, model_id=m) for m in models)), store.root, models,
            base_urls=dict.fromkeys(models, server.base_url)) as session:
        gen = generate_stage(store, "r1", config, session, prefetch_judge=True)
        prefetched = server.stats().per_model["judge"].received
        assert prefetched == SINGLE * 3
        judged = judge_stage(store, "r1", config, gen, session)
        judge_calls = (SINGLE + CHOICE) * 3 + CHOICE
        assert server.stats().per_model["judge"].received == judge_calls
        agg, folder = aggregate_stage(store, "r1", judged)
        upstream = resolve_upstream(store, "judge", "r1")
        assert upstream is not None
        again = judge_stage(store, "r2", config, upstream, session)
        assert server.stats().per_model["judge"].received == judge_calls
    table = judged.read()
    assert set(table["repeats"]) == {3} and set(table["repeat_reason"]) == {"all"}
    ok = table.filter(pl.col("repeats_ok") >= 2)
    assert ok["score_spread"].null_count() == 0 and ok.height > 0
    assert again.read().drop("from_ledger").equals(table.drop("from_ledger"))
    report = pl.read_parquet(folder / "judge_repeats.parquet")
    assert report.select("judge", "model", "judged", "repeated", "calls").rows() == [
        ("judge", "writer", SINGLE + CHOICE, SINGLE + CHOICE, (SINGLE + CHOICE) * 3)]
    assert (folder / "judge_repeats.md").is_file()
    assert agg.read().height == 1


def test_missing_prompt_set_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LookupError, match="no prompt set published"):
        generate_stage(Store(tmp_path), "r", CONFIG, session=None)  # type: ignore[arg-type]


@pytest.mark.parametrize("stages", [[], ["judge", "generate"], ["generate", "aggregate"],
                                    ["report"]])
def test_run_stages_takes_only_consecutive_stages(tmp_path: Path, stages: list[str]) -> None:
    with pytest.raises(ValueError, match="not consecutive stages"):
        run_stages(Store(tmp_path / "store"), "r1", CONFIG, stages, None)


def test_the_drift_anchors_are_judged_while_essays_are_written(curated_copy: Store) -> None:
    """generate + judge with drift in one session: the anchors' calls go out with the first
    essay's judge calls (they need no essay), the drift stage finds them done and sends
    nothing, and no call is paid twice."""
    from essaybench.bench.drift import DriftParams
    from essaybench.store.runs import record_run

    store = curated_copy
    config = CONFIG.model_copy(update={"drift": DriftParams(anchors=4)})
    models = ["writer", "judge"]
    with run_fake_server() as server:
        registry = registry_of(*(fake_spec(m, model_id=m).with_base_url(server.base_url)
                                 for m in models))
        record_run(store, "r1")
        snaps = run_stages(store, "r1", config, ["generate", "judge"], None, registry=registry)
        received = server.stats().per_model["judge"].received
    assert set(snaps) == {"generate", "judge", "drift"}
    with duckdb.connect(str(store.root / "ledger.duckdb"), read_only=True) as con:
        calls = dict(con.execute("SELECT stage, count(*) FROM llm_calls GROUP BY stage")
                     .fetchall())
        [(drift_done,)] = con.execute("SELECT max(finished_at) FROM llm_calls "
                                      "WHERE stage = 'drift'").fetchall()
    with duckdb.connect(str(store.root / "catalog.duckdb"), read_only=True) as con:
        [(generate_done,)] = con.execute("SELECT ended_at FROM stage_runs WHERE run_id = 'r1' "
                                         "AND stage = 'generate'").fetchall()
    assert calls["drift"] == 4 and received == calls["judge"] + 4  # each sent once
    assert drift_done <= generate_done, (drift_done, generate_done)
