"""The pairwise stage against the store: read a run's generate snapshot, write ``pairwise``.

The settings are a YAML file holding :class:`PairwiseParams`, either at its top level or
under a ``pairwise:`` key (so they can sit beside ``generate:`` and ``judge:`` in a
benchmark config once that config has the section).
"""

from __future__ import annotations

from pathlib import Path

from essaybench.bench.judge.request import Runner
from essaybench.bench.pairwise.design import STAGE, PairwiseParams
from essaybench.bench.pairwise.run import run_pairwise
from essaybench.core.yamlio import Loc, YamlConfigError, read_yaml
from essaybench.store import Snapshot, Store
from essaybench.store.run_stage import run_stage

UPSTREAM_STAGE = "generate"
SECTION = "pairwise"


class PairwiseConfigError(YamlConfigError):
    """The pairwise settings file is missing or invalid; the message names the file and line."""


def load_pairwise_params(path: Path | str) -> PairwiseParams:
    doc = read_yaml(path, "pairwise config", error=PairwiseConfigError)
    raw = doc.data
    at: Loc = ()
    if SECTION in raw:
        raw, at = raw[SECTION], (SECTION,)
    elif "judges" not in raw and {"generate", "judge"} & set(raw):
        raise doc.fail(f"looks like a benchmark config without a '{SECTION}:' section")
    return doc.validate(PairwiseParams, raw, at=at)


def pairwise_upstream(store: Store, snapshot_id: str | None = None,
                      base_run: str | None = None) -> Snapshot:
    """The essays to compare: ``snapshot_id`` if given, else the newest successful
    generate snapshot of ``base_run`` (of any run when ``base_run`` is None)."""
    if snapshot_id is not None:
        snapshot = store.get_snapshot(snapshot_id)
    else:
        snapshot = store.require_ok_snapshot(UPSTREAM_STAGE, base_run, STAGE,
                                             hint="generate essays first")
    snapshot.require_stage(UPSTREAM_STAGE, STAGE)
    return snapshot


def pairwise_stage(store: Store, run_id: str, params: PairwiseParams, upstream: Snapshot,
                   session: Runner) -> Snapshot:
    """Judge the designed pairs of ``upstream``'s essays; the ledger makes reruns free."""
    upstream.require_stage(UPSTREAM_STAGE, STAGE)
    essays = upstream.read()
    return run_stage(store, run_id=run_id, stage=STAGE, upstream=[upstream], params=params,
                     rows_in=essays.height, compute=lambda: run_pairwise(essays, params, session))
