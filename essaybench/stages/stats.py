"""The ``stats`` stage: is a difference real? Confidence intervals, rankings and bias monitors.

Reads a run's ``judge`` snapshot (and its essays, for lengths) and, when there is one,
its ``pairwise`` snapshot; writes one ``stats`` snapshot (every Table 5 cell with its
t-interval over prompt clusters, per scoring variant) and the report tables
under ``<store>/reports/<run_id>/stats/`` as Parquet, CSV and Markdown, with
``stats.md`` gathering them:

* ``score_ci_<variant>``: mean and CI per (judge, model, cell) — weighted, w/o WT,
  Align-Score, whichever the judgments carry;
* ``score_diff_<variant>``: paired differences between models in the same cell, and
  whether they are distinguishable at this sample size;
* ``length_bias``: score–length slope and correlations per judge × genre;
* ``self_preference``: own-family vs other scores per judge (families from the registry);
* ``genre_choice`` (when prompts left the genre open or offered a choice): per cell, how
  many judgments are of essays placed there by the genre they chose, and how many genre
  calls failed (counted in overall only);
* from pairwise judging: ``win_rates``, ``bradley_terry`` ranking, ``position_bias``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import polars as pl

from essaybench.bench.aggregate import render_markdown
from essaybench.bench.flagged_rule import DEFAULT_FLAGGED_RULE, FlaggedRule, ranked_judgments
from essaybench.bench.stats_tables import StatsParams, build_stats_tables, main_table
from essaybench.core.contracts import StageOutput
from essaybench.core.export import write_report as gather_report
from essaybench.store import Snapshot, Store
from essaybench.store.run_stage import run_stage

STAGE = "stats"


def write_report(tables: dict[str, pl.DataFrame], folder: Path) -> Path:
    """Export every table and gather their Markdown into ``stats.md``; returns its path."""
    return gather_report(tables, folder, "Statistics", name="stats.md", render=render_markdown,
                         intro=["Score intervals: t-intervals with prompts as clusters "
                                "(paired across models for differences; ci_note/diff_note "
                                "say why a cell has none, e.g. too few prompts; ci_caveat "
                                "marks small cells that may under-cover with skewed scores). "
                                "Win rates and Bradley–Terry: t-intervals with prompts as "
                                "clusters (the two orders of a pairwise comparison stay "
                                "together; Bradley–Terry under an N(0, 3²) prior on the "
                                "log-strengths, relative to its median model at 1000); a "
                                "Bradley–Terry model that is not estimable (separation) has "
                                "no rating. 'indistinguishable' = the interval of the "
                                "difference contains 0 (win rate: 0.5).\n"])


def stats_inputs(store: Store, run_id: str) -> tuple[Snapshot, Snapshot | None]:
    """The newest successful judge snapshot of ``run_id``, and its pairwise snapshot when
    the run has one over the same essays (a pairwise run on other essays is left out)."""
    judged = store.require_ok_snapshot("judge", run_id, STAGE)
    pairwise = store.latest_ok_snapshot("pairwise", run_id)
    if pairwise is not None and pairwise.upstream_snapshot_ids != judged.upstream_snapshot_ids:
        pairwise = None
    return judged, pairwise


def stats_stage(store: Store, run_id: str, params: StatsParams, judged: Snapshot,
                pairwise: Snapshot | None = None,
                family_of: Mapping[str, str] | None = None,
                flagged_essays: FlaggedRule = DEFAULT_FLAGGED_RULE) -> tuple[Snapshot, Path]:
    """Run the stage over a ``judge`` snapshot (and optionally a ``pairwise`` one). The
    score intervals (the leaderboard's) count flagged judgments by ``flagged_essays``
    (``bench/flagged_rule.py``); the bias monitors read the first judge's scores."""
    judged.require_stage("judge", STAGE)
    if pairwise is not None:
        pairwise.require_stage("pairwise", STAGE)
    judgments = judged.read()
    essays = store.get_snapshot(judged.upstream_snapshot_ids[0]).read()
    pairs = pairwise.read() if pairwise is not None else None
    folder = store.root / "reports" / run_id / STAGE
    upstream = [judged, *([pairwise] if pairwise is not None else [])]

    def compute() -> StageOutput:
        tables = build_stats_tables(judgments, essays, pairs, params, family_of or {},
                                    ranked=ranked_judgments(judgments, flagged_essays))
        report = write_report(tables, folder)
        return StageOutput(main_table(tables), {"report": str(report),
                                                "tables": sorted(tables)},
                           run_meta={"flagged_essays": flagged_essays})

    snapshot = run_stage(store, run_id=run_id, stage=STAGE, upstream=upstream,
                         params={**params.model_dump(mode="json"),
                                 "flagged_essays": flagged_essays},
                         rows_in=judgments.height, compute=compute)
    return snapshot, folder
