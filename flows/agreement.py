"""The ``agreement`` stage as a flow: a run's judge against the user's human annotations."""

from __future__ import annotations

from prefect import flow

from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S, DEFAULT_STORE_ROOT
from essaybench.tasks.agreement import agreement_stage_task


@flow(name="agreement")
def agreement_flow(
    base_run: str,
    annotations: str,
    kind: str = "pairwise",
    tiers: dict[str, list[float]] | str | None = None,
    store_root: str = DEFAULT_STORE_ROOT,
    run_id: str | None = None,
    ignore_unknown: bool = False,
    scale: tuple[float, float] | None = None,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> str:
    """Judge–human agreement for ``base_run``'s judgments; returns the snapshot id.
    ``ignore_unknown``: leave out (and count) annotation rows naming prompts, models or
    essays the run does not have, instead of failing; ``scale``: (low, high) of absolute
    scores (default 0–10); ``tiers``: high/medium/low value sets, or "top/median/bottom"
    for pairwise annotations. See ``AgreementParams``."""
    params: dict[str, object] = {"annotations": annotations, "kind": kind, "tiers": tiers,
                                 "ignore_unknown": ignore_unknown, "scale": scale}
    return agreement_stage_task(run_id or base_run, params, store_root, base_run,
                                lock_timeout_s)
