"""``llm_calls.batched`` survives every way rows leave a ledger: a run's export (what a sharded
run's shards are seeded with), a shard's Parquet parts, and the merge into the store's
ledger; and a result served from the ledger still says it was batched."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from essaybench.llm.batch import BatchRunner
from essaybench.llm.ledger import Ledger, as_ledger_frame
from essaybench.llm.part_ledger import PartLedger
from essaybench.llm.scope import ReuseScope
from essaybench.store.parts import PartStore
from tests.llm.batch.conftest import FAST, gateway, requests


def _batched(path: Path) -> dict[str, bool | None]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return dict(con.execute("SELECT key, batched FROM llm_calls").fetchall())
    finally:
        con.close()


def test_batched_is_kept_by_export_parts_and_merge(serve: Any, tmp_path: Path) -> None:
    fake = serve({"delay_s": 0.02})
    with Ledger(tmp_path / "a.duckdb", linger_s=0) as ledger:
        got = asyncio.run(BatchRunner(gateway(fake, ledger), FAST).run(requests(3)))
        exported = ledger.export_runs(ReuseScope.of_run("run-1"))
        served = ledger.lookup_ok([r.key for r in got])
    assert all(r.batched for r in got)
    assert all(r.batched and r.from_ledger for r in served.values())
    assert exported["batched"].to_list() == [True] * 3

    # A shard seeded with the export records a direct call of its own in Parquet parts.
    parts = PartStore(tmp_path / "parts")
    parts.write_parquet("seed/part-0.parquet", exported)
    with PartLedger(parts, "ledger/shard=0", seed=["seed/part-0.parquet"],
                    linger_s=0) as shard:
        direct = asyncio.run(gateway(fake, shard, batch="none").run(
            requests(1, prefix="另一篇")))
        assert all(r.batched for r in shard.lookup_ok([r.key for r in got]).values())
    frames = [as_ledger_frame(parts.read_parquet(rel))
              for rel in ["seed/part-0.parquet", *parts.list("ledger/shard=0", ".parquet")]]
    with Ledger(tmp_path / "b.duckdb", linger_s=0) as merged:
        merged.insert_frame(pl.concat(frames), "ledger_import")
    assert _batched(tmp_path / "b.duckdb") == {
        **{r.key: True for r in got}, direct[0].key: None}
    assert _batched(tmp_path / "a.duckdb") == {r.key: True for r in got}
