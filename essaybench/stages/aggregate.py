"""The ``aggregate`` stage: Table 5 (weighted, w/o WT), trait means, length compliance
(and, when essays were judged repeatedly, the judgments' spread: ``judge_repeats``; when
judgments were flagged, the second opinions beside the first: ``second_opinions``).

Table 5 weighted is the leaderboard's: flagged judgments count in it by the config's
``flagged_essays`` rule (``bench/flagged_rule.py``), recorded in the catalog row's meta.

Reads a ``judge`` snapshot (and the essays it judged), writes the Table 5 snapshot and
the report tables under ``<store>/reports/<run_id>/``, and records the run's health
(coverage per model × judge against the floor, ``bench.health``) in its catalog row
(read back by ``runs.health``)."""

from __future__ import annotations

from pathlib import Path

from essaybench.bench.aggregate import export, has_repeats, judge_repeats, table5, trait_means
from essaybench.bench.compliance import compliance_rates, compliance_table
from essaybench.bench.flagged_rule import (
    DEFAULT_FLAGGED_RULE,
    FlaggedRule,
    ranked_judgments,
    second_opinion_table,
)
from essaybench.bench.health import DEFAULT_COVERAGE_FLOOR, assess_health
from essaybench.bench.judge.flags import flag_counts
from essaybench.core.contracts import StageOutput
from essaybench.store import Snapshot, Store
from essaybench.store.run_stage import run_stage

STAGE = "aggregate"


def aggregate_stage(store: Store, run_id: str, upstream: Snapshot,
                    coverage_floor: float = DEFAULT_COVERAGE_FLOOR,
                    flagged_essays: FlaggedRule = DEFAULT_FLAGGED_RULE
                    ) -> tuple[Snapshot, Path]:
    """Table 5 (weighted, w/o WT), trait means and length compliance; exported as
    Parquet, CSV and Markdown under ``<store>/reports/<run_id>/``. The run's health
    against ``coverage_floor`` goes to the stage run's catalog meta (``run_health``), with
    the ``flagged_essays`` rule Table 5 weighted ranks by."""
    upstream.require_stage("judge", f"the {STAGE} stage")
    judgments = upstream.read()
    essays = store.get_snapshot(upstream.upstream_snapshot_ids[0]).read()
    folder = store.root / "reports" / run_id

    def compute() -> StageOutput:
        main = table5(ranked_judgments(judgments, flagged_essays), "score_weighted")
        checked = compliance_table(essays, prompt_column="prompt_text")
        tables = {"table5_weighted": main,
                  "table5_unweighted": table5(judgments, "score_unweighted"),
                  "trait_means": trait_means(judgments),
                  "length_compliance": compliance_rates(checked)}
        if has_repeats(judgments):  # judge.repeats: the spread of the repeated judgments
            tables["judge_repeats"] = judge_repeats(judgments)
        if "essay_flags" in judgments.columns:  # injection and suspicious-score flags
            tables["flags"] = flag_counts(judgments)
            second = second_opinion_table(judgments, flagged_essays)
            if second.height:
                tables["second_opinions"] = second
        paths = export(tables, folder)
        health = assess_health(essays, judgments, run_id=run_id,
                               coverage_floor=coverage_floor)
        return StageOutput(main, {"reports": sorted(str(p) for p in paths.values())},
                           run_meta={"health": health.model_dump(mode="json"),
                                     "flagged_essays": flagged_essays})

    snapshot = run_stage(store, run_id=run_id, stage=STAGE, upstream=[upstream],
                         params={"scores": ["score_weighted", "score_unweighted"],
                                 "flagged_essays": flagged_essays},
                         rows_in=judgments.height, compute=compute)
    return snapshot, folder
