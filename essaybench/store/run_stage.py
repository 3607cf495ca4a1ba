"""Run one stage against the store: catalog bookkeeping around a pure computation.

The stage's computation is a function returning a ``StageOutput`` (or a
``StreamedOutput``, written a batch at a time); this module
records the run as ``running`` before it starts (with its pid and host), refreshes its
heartbeat while it computes, writes the snapshot, and marks the run ``ok`` or ``failed``
with the error text, so a crashed or failed stage is visible in the catalog and can be
rerun from the same upstream snapshot; one whose process died is listed as ``abandoned``.
"""

from __future__ import annotations

import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import polars as pl
from polars.exceptions import PanicException
from pydantic import BaseModel

from essaybench.core.activity import doing
from essaybench.core.contracts import StageOutput, StreamedOutput, decision_counts
from essaybench.core.errors import user_error_of
from essaybench.core.gcfreeze import frozen_heap
from essaybench.core.redact import redact
from essaybench.core.version import code_version
from essaybench.store import Snapshot, Store, liveness


class StageFailed(RuntimeError):
    """A stage raised; the catalog row holds the same error text. ``user_error``: the
    message of the user's mistake it raised for (a bad input file, a missing key
    variable; see ``core.errors``), None when it failed for another reason."""

    def __init__(self, message: str, run_id: str = "", stage: str = "",
                 user_error: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.stage = stage
        self.user_error = user_error

    def __reduce__(self) -> tuple[type[StageFailed], tuple[str, str, str, str | None]]:
        return type(self), (str(self), self.run_id, self.stage, self.user_error)


def params_dict(params: BaseModel | dict[str, Any] | None) -> dict[str, Any]:
    if params is None:
        return {}
    if isinstance(params, BaseModel):
        return params.model_dump(mode="json")
    return dict(params)


def run_stage(
    store: Store,
    *,
    run_id: str,
    stage: str,
    upstream: Sequence[Snapshot],
    params: BaseModel | dict[str, Any] | None,
    compute: Callable[[], StageOutput | StreamedOutput],
    rows_in: int | None = None,
) -> Snapshot:
    with frozen_heap():
        return _run_stage(store, run_id, stage, upstream, params, compute, rows_in)


def _run_stage(store: Store, run_id: str, stage: str, upstream: Sequence[Snapshot],
               params: BaseModel | dict[str, Any] | None,
               compute: Callable[[], StageOutput | StreamedOutput],
               rows_in: int | None) -> Snapshot:
    upstream_ids = [s.snapshot_id for s in upstream]
    stage_run_id = store.start_stage_run(run_id, stage, upstream_ids, params_dict(params),
                                         code_version(), rows_in)
    started = time.perf_counter()
    try:
        # Read at call time: tests shorten the interval.
        with liveness.Heartbeat(lambda: store.heartbeat_stage_run(stage_run_id),
                                liveness.HEARTBEAT_S), doing(stage):  # a display names it
            output = compute()
            if isinstance(output, StreamedOutput):
                counted = _Tally(output.batches)
                snapshot = store.write_snapshot_batches(stage, counted, upstream_ids,
                                                        lambda: output.meta)
                counts, rows = dict(counted.counts), snapshot.n_rows
            else:
                snapshot = store.write_snapshot(stage, output.table, upstream_ids, output.meta)
                counts, rows = output.counts(), output.table.height
    except (Exception, PanicException) as exc:  # a panic in polars' Rust code is a
        # BaseException: without it the stage run would stay "running" until abandoned.
        # An exception's text is untrusted: stored and printed only redacted of secrets.
        error = redact(f"{type(exc).__name__}: {exc}")
        waiting = getattr(exc, "stage_status", None)
        if isinstance(waiting, str):  # not a failure (llm.batch.route.BatchesPending):
            # the stage waits for work elsewhere and is entered again; recorded as such
            store.finish_stage_run(stage_run_id, status=waiting, error=error)
            raise
        store.finish_stage_run(stage_run_id, status="failed", error=error + "\n"
                               + redact("".join(traceback.format_exception(exc, limit=-3))))
        mistake = user_error_of(exc)
        raise StageFailed(f"stage {stage!r} of run {run_id} failed: {error}", run_id, stage,
                          None if mistake is None else redact(str(mistake))) from exc
    store.finish_stage_run(
        stage_run_id, status="ok", snapshot_id=snapshot.snapshot_id,
        rows_in=rows, rows_out=counts.get("kept", 0),
        meta={"decisions": counts, "seconds": round(time.perf_counter() - started, 3),
              **output.run_meta},
    )
    return snapshot


class _Tally:
    """The batches of a streamed output, passed on unchanged, counted by decision."""

    def __init__(self, batches: Iterator[pl.DataFrame]) -> None:
        self._batches = batches
        self.counts: Counter[str] = Counter()

    def __iter__(self) -> Iterator[pl.DataFrame]:
        for batch in self._batches:
            self.counts.update(decision_counts(batch))
            yield batch
