"""Prompt rotation in a real catalog (DuckDB file): a run started again gets its recorded
draw back, a change of core shows and comparisons use the cores in common, and a rerun of
a run that did not rotate draws nothing."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from essaybench.bench.config import BenchmarkConfig, select_prompts
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.bench.rotation import CORE, RotationParams
from essaybench.runs.rotation import compared_prompts, rotation_selection, usage_frame
from essaybench.stages.generate import run_prompts
from essaybench.store import Store
from essaybench.store.runs import record_run
from tests.bench.test_rotation import pool

CONFIG = BenchmarkConfig(per_genre=4, rotation=RotationParams(rotate_share=0.5, seed=1),
                         generate=GenerateParams(models=("w",)),
                         judge=JudgeParams(judges=["j"]))


def test_a_run_started_again_gets_its_draw_back(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    record_run(store, "a")
    assert CONFIG.rotation is not None
    first, prompts = rotation_selection(store, "a", pool(), "ps-1", 4, CONFIG.rotation)
    again, same = rotation_selection(store, "a", pool(), "ps-1", 4, CONFIG.rotation)
    assert again.roles == first.roles and same.equals(prompts)
    assert usage_frame(store).height == 16
    assert set(usage_frame(store)["run_id"]) == {"a"}


def test_a_new_core_shows_and_comparisons_use_the_cores_in_common(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    for run in ("a", "b"):
        record_run(store, run)
    a, _ = rotation_selection(store, "a", pool(), "ps-1", 4, RotationParams(rotate_share=0.5))
    b, _ = rotation_selection(store, "b", pool(), "ps-1", 4,
                              RotationParams(rotate_share=0.5, seed=9))
    assert b.core_changed and a.fingerprint != b.fingerprint
    common, line = compared_prompts(store, "b", "a")
    assert common == set(a.ids(CORE)) & set(b.ids(CORE))
    assert line is not None and f"{len(common)} in common" in line
    assert "the cores differ (8 now, 8 in a)" in line
    # The recorded fingerprints say the same, per run.
    usage = usage_frame(store)
    assert usage.group_by("run_id").agg(pl.col("core_fingerprint").n_unique())[
        "core_fingerprint"].to_list() == [1, 1]
    assert set(usage["core_fingerprint"]) == {a.fingerprint, b.fingerprint}


def test_a_rerun_of_a_run_that_did_not_rotate_writes_its_sample(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    record_run(store, "plain")
    record_run(store, "again", base_run="plain", from_stage="generate")
    selected, rotation = run_prompts(store, "again", CONFIG, pool(), "ps-1")
    assert rotation is None and usage_frame(store).is_empty()
    assert selected.equals(select_prompts(pool(), 4, CONFIG.sample_seed))


def test_no_core_in_common_is_said_and_compares_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    params = RotationParams(rotate_share=0.5)
    for run, genre in (("a", "argumentative"), ("b", "narrative")):
        record_run(store, run)
        rotation_selection(store, run, pool(), "ps-1", 4, params, [genre])
    common, line = compared_prompts(store, "b", "a")
    assert common == set()
    assert line is not None and "no core prompt in common with a" in line
    assert compared_prompts(store, "never", None) == (None, None)
