"""The pairwise stage against the store: read a run's generate snapshot, write ``pairwise``.

The settings are a YAML file holding :class:`PairwiseParams`, either at its top level or
under a ``pairwise:`` key (so they can sit beside ``generate:`` and ``judge:`` in a
benchmark config once that config has the section).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from essaybench.judge import Runner
from essaybench.pairwise import STAGE, PairwiseParams, run_pairwise
from essaybench.stages import run_stage
from essaybench.store import Snapshot, Store
from essaybench.yamlio import load_strict

UPSTREAM_STAGE = "generate"
SECTION = "pairwise"


class PairwiseConfigError(ValueError):
    """The pairwise settings file is missing or invalid; the message names the file."""


def load_pairwise_params(path: Path | str) -> PairwiseParams:
    path = Path(path)
    if not path.is_file():
        raise PairwiseConfigError(f"pairwise config not found: {path}")
    try:
        raw = load_strict(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise PairwiseConfigError(f"pairwise config {path}: invalid YAML: {exc}") from exc
    if isinstance(raw, dict) and SECTION in raw:
        raw = raw[SECTION]
    elif isinstance(raw, dict) and "judges" not in raw and {"generate", "judge"} & set(raw):
        raise PairwiseConfigError(f"pairwise config {path} looks like a benchmark config "
                                  f"without a '{SECTION}:' section")
    try:
        return PairwiseParams.model_validate(raw)
    except ValidationError as exc:
        raise PairwiseConfigError(
            f"pairwise config {path} is invalid (expected the pairwise settings at the top "
            f"level or under '{SECTION}:'):\n{exc}") from exc


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
