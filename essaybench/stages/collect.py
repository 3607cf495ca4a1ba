"""The ``collect`` stage: every raw record of the configured sources, read or quarantined.

The first stage: it has no upstream snapshot; the sources config is its params. It streams:
the snapshot is written a batch of records at a time."""

from __future__ import annotations

from essaybench.curate.collect import stream_collect
from essaybench.curate.config import CurateConfig
from essaybench.store import Snapshot, Store
from essaybench.store.run_stage import run_stage

STAGE = "collect"


def collect_stage(store: Store, run_id: str, config: CurateConfig) -> Snapshot:
    sources = config.load_sources()
    return run_stage(store, run_id=run_id, stage=STAGE, upstream=[],
                     params={"sources": sources.model_dump(mode="json"),
                             "deid": config.deid.model_dump(mode="json")},
                     compute=lambda: stream_collect(sources, config.deid))
