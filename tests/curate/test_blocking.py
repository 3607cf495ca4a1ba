"""Splitting large K-means blocks: sizes bounded, rows kept, close rows kept together."""

from __future__ import annotations

import numpy as np
import polars as pl

from essaybench.core.contracts import Decision
from essaybench.core.hashing import prompt_id
from essaybench.curate.blocking import blocks, split_large
from essaybench.curate.dedup import DedupParams, run_dedup
from tests.curate.test_dedup import DISTINCT, REWORDINGS


def _points(n_groups: int, per_group: int, seed: int = 0) -> np.ndarray:
    """Tight groups of points (each group a near-duplicate family) far apart."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_groups, 16)) * 10
    return np.repeat(centres, per_group, axis=0) + rng.normal(size=(n_groups * per_group, 16))


def test_small_blocks_are_left_alone() -> None:
    reduced = _points(3, 5)
    row_blocks = [np.arange(0, 10), np.arange(5, 15)]
    out = split_large(row_blocks, reduced, per_row=2, max_block=10, seed=0)
    assert [b.tolist() for b in out] == [b.tolist() for b in row_blocks]


def test_a_large_block_is_split_and_every_row_stays() -> None:
    reduced = _points(40, 25)  # 1,000 rows in one block
    members = np.arange(1000)
    out = split_large([members], reduced, per_row=2, max_block=150, seed=0)
    assert len(out) > 1
    assert max(b.size for b in out) <= 300  # about max_block; never the whole
    assert set(np.concatenate(out).tolist()) == set(members.tolist())
    for block in out:
        assert np.all(np.diff(block) > 0)  # ascending: candidate_pairs puts the earlier first
    # rows of one tight group (near duplicates of each other) share a sub-block
    together = {tuple(b.tolist()) for b in out}
    for g in range(40):
        group = set(range(g * 25, g * 25 + 25))
        assert any(group <= set(b) for b in together), g
    compared = sum(b.size * (b.size - 1) // 2 for b in out)
    assert compared < 1000 * 999 // 2 / 3


def test_blocks_then_split_matches_a_direct_assignment_when_small() -> None:
    distances = np.array([[0.1, 0.5, 0.9], [0.9, 0.1, 0.5], [0.5, 0.9, 0.1]])
    row_blocks = blocks(distances, 2)
    assert [b.tolist() for b in split_large(row_blocks, np.eye(3), 2, 2, 0)] == [
        b.tolist() for b in row_blocks]


def test_dedup_with_small_blocks_still_finds_rewordings_and_keeps_distinct_prompts() -> None:
    texts = DISTINCT + [b for _, b in REWORDINGS]
    table = pl.DataFrame({"record_id": [f"r{i}" for i in range(len(texts))], "text": texts,
                          "prompt_id": [prompt_id(t) for t in texts],
                          "decision": [Decision.KEPT.value] * len(texts)})
    whole = run_dedup(table, DedupParams(k_points=3))
    small = run_dedup(table, DedupParams(k_points=3, max_block=8))
    assert small.meta["largest_block"] < whole.meta["largest_block"]
    assert small.meta["pairs_compared"] < whole.meta["pairs_compared"]
    kept = small.table.filter(pl.col("decision") == Decision.KEPT.value)["text"].to_list()
    assert set(DISTINCT) <= set(kept)
    # splitting only removes comparisons: what it drops, the whole pass drops too
    dropped = set(small.table.filter(pl.col("decision") == "duplicate")["text"])
    assert dropped <= set(whole.table.filter(pl.col("decision") == "duplicate")["text"])
    assert len(dropped) >= len(REWORDINGS) // 2
