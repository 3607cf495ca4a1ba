"""Collect and filter stream (issue 29 item 1): a batch leaves before the next source is
read or the next batch comes in, and the snapshots are those of the whole tables."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from essaybench.core.paths import PROJECT_ROOT
from essaybench.curate.collect import _RecordIds, run_collect, stream_collect
from essaybench.curate.config import load_curate_config
from essaybench.curate.filter import FilterParams, run_filter, stream_filter
from essaybench.sources.config import SourcesConfig, SourceSpec
from essaybench.sources.encoding import SourceReadError
from essaybench.stages.collect import collect_stage
from essaybench.stages.filter import filter_stage
from essaybench.store import Store


def _two_sources(tmp_path: Path) -> SourcesConfig:
    lines = [json.dumps({"id": i, "query": f"以“门{i}”为题写一篇记叙文"}, ensure_ascii=False)
             for i in range(5)]
    (tmp_path / "a.jsonl").write_text("\n".join(lines), encoding="utf-8")
    specs = [SourceSpec.model_validate({"name": n, "kind": "chat_jsonl", "path": f"{n}.jsonl"})
             for n in ("a", "b")]  # b.jsonl is missing
    return SourcesConfig(base_dir=tmp_path, sources=specs)


def test_collect_hands_on_a_batch_before_it_reads_the_next_source(tmp_path: Path) -> None:
    batches = stream_collect(_two_sources(tmp_path), batch_rows=2).batches
    first = next(batches)
    assert first["locator"].to_list() == ["line 1", "line 2"]
    assert next(batches).height == 2
    with pytest.raises(SourceReadError, match=r"b\.jsonl"):
        list(batches)


def test_filter_hands_on_a_batch_for_each_batch_it_gets(tmp_path: Path) -> None:
    table = run_collect(_two_sources(tmp_path).model_copy(
        update={"sources": _two_sources(tmp_path).sources[:1]})).table

    def upstream() -> Iterator[pl.DataFrame]:
        yield table.head(3)
        raise RuntimeError("the upstream snapshot went away")

    out = stream_filter(upstream(), FilterParams())
    first = next(out.batches)
    assert first.height == 3 and first["decision"].to_list() == ["kept"] * 3
    assert out.meta == {}  # complete only after the last batch
    with pytest.raises(RuntimeError, match="went away"):
        next(out.batches)


def test_a_record_id_repeated_in_another_batch_is_refused() -> None:
    ids = _RecordIds()
    ids.checked(pl.DataFrame({"record_id": ["r00000000000000a", "r00000000000000b"],
                              "source": ["s", "s"], "locator": ["line 1", "line 2"]}))
    ids.checked(pl.DataFrame({"record_id": ["r00000000000000c", "r00000000000000a"],
                              "source": ["s", "s"], "locator": ["line 3", "line 1"]}))
    with pytest.raises(ValueError, match="two records share a locator: record id "
                                         "r00000000000000a"):
        ids.check_all()
    with pytest.raises(ValueError, match="two records share a locator: s line 1"):
        ids.checked(pl.DataFrame({"record_id": ["r1", "r1"], "source": ["s", "s"],
                                  "locator": ["line 1", "line 1"]}))


def test_the_streamed_stages_write_the_snapshots_of_the_whole_tables(tmp_path: Path) -> None:
    config = load_curate_config(PROJECT_ROOT / "configs" / "curate.yaml")
    sources = config.load_sources()
    store = Store(tmp_path / "streamed")
    collected = collect_stage(store, "r1", config)
    filtered = filter_stage(store, "r1", config, collected)
    whole = Store(tmp_path / "whole")
    table = run_collect(sources, config.deid).table
    assert collected.snapshot_id == whole.write_snapshot(
        "collect", table, [], collected.meta).snapshot_id
    drop = config.deid.mode == "drop"
    kept = collected.read_kept()
    assert filtered.snapshot_id == whole.write_snapshot(
        "filter", run_filter(kept, config.filter, drop_personal_data=drop).table,
        [collected.snapshot_id]).snapshot_id
    # in small batches (several row groups in, several out): the same snapshots again
    small = Store(tmp_path / "small")
    again = small.write_snapshot_batches(
        "collect", stream_collect(sources, config.deid, batch_rows=7).batches)
    assert again.snapshot_id == collected.snapshot_id
    refiltered = small.write_snapshot_batches(
        "filter", stream_filter(again.iter_kept(5), config.filter,
                                drop_personal_data=drop).batches, [again.snapshot_id])
    assert refiltered.snapshot_id == filtered.snapshot_id
    assert refiltered.read().equals(filtered.read())
    runs = {r.stage: r for r in store.stage_runs()}
    assert runs["filter"].rows_in == kept.height == collected.count_kept()
    assert runs["collect"].rows_in == table.height
    assert filtered.meta["rows"] == kept.height
    assert filtered.meta["kept"] == filtered.count_kept() > 0
