"""The ``filter`` stage: drop what is not an essay prompt (with a reason per drop),
normalise the text, give each prompt its content-hash id.

Reads the kept rows of the newest (or given) upstream snapshot a batch at a time; writes
every row it saw with its decision, a batch at a time (it streams)."""

from __future__ import annotations

from essaybench.curate.config import CurateConfig
from essaybench.curate.filter import stream_filter
from essaybench.stages.curate_step import stream_curate_step
from essaybench.store import Snapshot, Store

STAGE = "filter"


def filter_stage(store: Store, run_id: str, config: CurateConfig,
                 upstream: Snapshot | None) -> Snapshot:
    # deid.mode is in the collect stage's params, so upstream already tells the modes apart.
    drop = config.deid.mode == "drop"
    return stream_curate_step(store, run_id, STAGE, upstream, config.filter,
                              lambda batches: stream_filter(batches, config.filter,
                                                            drop_personal_data=drop))
