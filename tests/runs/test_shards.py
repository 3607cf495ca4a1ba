"""The shard plan: every (writer, prompt) pair in exactly one shard, as even as it gets."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from essaybench.runs.shards import Shard, plan_shards


def pairs(shards: Sequence[Shard]) -> Counter[tuple[str, str]]:
    return Counter((m, p) for s in shards for m in s.models for p in s.prompt_ids)


def test_fewer_shards_than_writers_deal_whole_writers() -> None:
    shards = plan_shards(["a", "b", "c"], ["p1", "p2"], 2)
    assert [s.models for s in shards] == [("a", "c"), ("b",)]
    assert all(s.prompt_ids == ("p1", "p2") for s in shards)
    assert [s.index for s in shards] == [0, 1]


def test_more_shards_than_writers_cut_prompt_ranges() -> None:
    prompts = [f"p{i}" for i in range(10)]
    shards = plan_shards(["a", "b"], prompts, 5)
    assert [(s.models, len(s.prompt_ids)) for s in shards] == [
        (("a",), 4), (("a",), 3), (("a",), 3), (("b",), 5), (("b",), 5)]
    assert shards[0].prompt_ids + shards[1].prompt_ids + shards[2].prompt_ids == tuple(prompts)


def test_never_more_ranges_than_prompts_and_nothing_to_do() -> None:
    assert len(plan_shards(["a"], ["p1", "p2"], 8)) == 2
    assert plan_shards(["a"], [], 3) == []
    with pytest.raises(ValueError, match="at least 1"):
        plan_shards(["a"], ["p"], 0)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.integers(1, 6), st.integers(0, 40), st.integers(1, 30))
def test_every_pair_in_exactly_one_shard(n_models: int, n_prompts: int, n_shards: int) -> None:
    models = [f"m{i}" for i in range(n_models)]
    prompts = [f"p{i}" for i in range(n_prompts)]
    shards = plan_shards(models, prompts, n_shards)
    got = pairs(shards)
    assert set(got) == {(m, p) for m in models for p in prompts}
    assert set(got.values()) <= {1}
    assert len(shards) <= n_shards
    assert [s.index for s in shards] == list(range(len(shards)))
    if shards and n_shards > n_models:  # ranges of one writer differ by at most one prompt
        for m in models:
            sizes = [len(s.prompt_ids) for s in shards if s.models == (m,)]
            assert max(sizes) - min(sizes) <= 1
