"""Comparing a run with an earlier one, read from the store (``essaybench compare``).

Not a stage of its own yet: it reads two runs' ``judge`` snapshots and the essays they
judged and hands them to :func:`essaybench.bench.compare.compare_runs`; the report is
written by the command. The default baseline is the one the alerts stage uses
(``runs/comparable.py``).
"""

from __future__ import annotations

import polars as pl

from essaybench.bench.compare import compare_runs
from essaybench.bench.flagged_rule import (
    RECORDED_BEFORE,
    FlaggedRule,
    flagged_rule_of,
    ranked_score,
)
from essaybench.core.errors import NotFoundError
from essaybench.runs.comparable import last_comparable_run, why_not_baseline
from essaybench.store import Snapshot, Store


def choose_baseline(store: Store, run_id: str, base: str | None = None
                    ) -> tuple[Snapshot, Snapshot, str, str]:
    """``run_id``'s judge snapshot, its baseline's, the baseline run and one line saying
    which run that is and why: ``base`` when given (said not comparable, with why, when
    the alerts' rule would not have chosen it), else the run the alerts stage compares with
    (:func:`last_comparable_run`: a rerun's is its original run's). A ``NotFoundError``
    when either run has no successful judge stage, or there is no comparable run."""
    now = _judged(store, run_id)
    if base is None:
        chosen = last_comparable_run(store, run_id, now)
        if chosen.judged is None or chosen.run_id is None:
            raise NotFoundError(f"no run to compare {run_id} with ({chosen.line(run_id)}); "
                                "name one with --base RUN")
        return now, chosen.judged, chosen.run_id, chosen.line(run_id)
    before = _judged(store, base)
    essays_now = store.get_snapshot(now.upstream_snapshot_ids[0]).read()
    why = why_not_baseline(store, base, now.read(), essays_now, before)
    return now, before, base, (f"baseline: {base} (given with --base)" if why is None else
                               f"baseline: {base} (given with --base), NOT comparable by "
                               f"the rule alerts use: {why}")


def _judged(store: Store, run_id: str) -> Snapshot:
    snap = store.latest_ok_snapshot("judge", run_id)
    if snap is None:
        raise NotFoundError(f"run {run_id} has no successful judge stage in {store.root}")
    return snap


def compare_snapshots(store: Store, now: Snapshot, before: Snapshot, *,
                      score: str = "score_weighted", n_boot: int = 2000, level: float = 0.95,
                      seed: int = 0, flagged: FlaggedRule = RECORDED_BEFORE,
                      prompts: set[str] | None = None) -> pl.DataFrame:
    """:func:`compare_runs` over two judge snapshots and the essays they judged, both
    runs' flagged judgments counted by ``flagged`` (``bench/flagged_rule.py``: pass the
    run's own rule, :func:`run_flagged_rule`, to compare what its leaderboard shows);
    ``prompts``: only these (a rotating run's core, ``runs/rotation.py``)."""
    for snap in (now, before):
        if snap.stage != "judge":
            raise ValueError(f"compare reads 'judge' snapshots, got {snap.snapshot_id}")
    essays = [store.get_snapshot(s.upstream_snapshot_ids[0]).read() for s in (now, before)]
    judged = [now.read(), before.read()]
    if prompts is not None:
        keep = pl.col("prompt_id").is_in(sorted(prompts))
        essays, judged = [f.filter(keep) for f in essays], [f.filter(keep) for f in judged]
    return compare_runs(ranked_score(judged[0], flagged, score),
                        ranked_score(judged[1], flagged, score), essays_now=essays[0],
                        essays_before=essays[1], score=score, n_boot=n_boot, level=level,
                        seed=seed)


def run_flagged_rule(store: Store, run_id: str) -> FlaggedRule:
    """The ``flagged_essays`` rule ``run_id``'s leaderboard was ranked by (its stats or
    aggregate stage's catalog row; ``first_judge`` for runs from before the rule)."""
    return flagged_rule_of(store.stage_runs(run_id, 1000))
