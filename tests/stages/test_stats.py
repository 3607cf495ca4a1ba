"""The stats stage over real generate/judge/pairwise snapshots (the session's judged run)."""

from __future__ import annotations

import polars as pl
import pytest

from essaybench.bench.aggregate import table5
from essaybench.bench.stats_tables import StatsParams
from essaybench.stages.stats import stats_inputs, stats_stage
from essaybench.store import Snapshot, Store
from tests.helpers import JUDGED_FAMILIES, JUDGED_WRITERS

PARAMS = StatsParams(n_boot=300, seed=7)


def test_stats_stage_tables_snapshot_and_determinism(
        judged_copy: tuple[Store, Snapshot, Snapshot]) -> None:
    store, judged, pairs = judged_copy
    found_judge, found_pairs = stats_inputs(store, "r1")
    assert (found_judge.snapshot_id, found_pairs and found_pairs.snapshot_id) == (
        judged.snapshot_id, pairs.snapshot_id)
    snap, folder = stats_stage(store, "r1", PARAMS, judged, pairs, JUDGED_FAMILIES)
    assert snap.stage == "stats"
    assert set(snap.upstream_snapshot_ids) == {judged.snapshot_id, pairs.snapshot_id}
    for name in ("score_ci_weighted", "score_ci_unweighted", "score_diff_weighted",
                 "length_bias", "self_preference", "win_rates", "bradley_terry",
                 "position_bias"):
        assert (folder / f"{name}.parquet").is_file(), name
    assert "## " in (folder / "stats.md").read_text(encoding="utf-8") or \
        "### " in (folder / "stats.md").read_text(encoding="utf-8")
    # The CI's point estimate is Table 5's number, and the interval brackets it.
    cis = pl.read_parquet(folder / "score_ci_weighted.parquet")
    t5 = table5(judged.read())
    for row in t5.iter_rows(named=True):
        mine = cis.filter((pl.col("model") == row["model"]) & (pl.col("cell") == "overall"))
        assert mine["mean"][0] == pytest.approx(row["overall"], abs=1e-9)
        assert mine["ci_lo"][0] <= mine["mean"][0] <= mine["ci_hi"][0]
    bt = pl.read_parquet(folder / "bradley_terry.parquet")
    assert sorted(bt["model"]) == sorted(JUDGED_WRITERS) and bt["rank"].to_list() == [1, 2, 3]
    # 3 writers → 3 pairs; every ok merged pair is counted once
    wins = pl.read_parquet(folder / "win_rates.parquet")
    merged = pairs.read()
    assert wins.height == 3
    assert int(wins["n"].sum()) == merged.filter(pl.col("status") == "ok").height
    # self-preference: the qwen judge's own family is qwen-writer
    sp = pl.read_parquet(folder / "self_preference.parquet")
    assert sp["family"].to_list() == ["qwen"]
    own = judged.read().filter((pl.col("model") == "qwen-writer") & (pl.col("status") == "ok"))
    assert sp["own_mean"][0] == pytest.approx(own["score_weighted"].mean(), abs=1e-9)
    # seeded: the same inputs and params give the same content-addressed snapshot
    again, _ = stats_stage(store, "r1", PARAMS, judged, pairs, JUDGED_FAMILIES)
    assert again.snapshot_id == snap.snapshot_id


def test_stats_stage_refuses_the_wrong_snapshot(judged_run: tuple[Store, Snapshot, Snapshot]
                                                ) -> None:
    store, _, pairs = judged_run
    with pytest.raises(ValueError, match="reads a 'judge' snapshot"):
        stats_stage(store, "r1", PARAMS, pairs)
    with pytest.raises(LookupError, match="no successful 'judge'"):
        stats_inputs(store, "no-such-run")
