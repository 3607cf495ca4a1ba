"""The ``aggregate`` stage: Table 5 (weighted, w/o WT), trait means, length compliance
(and, when essays were judged repeatedly, the judgments' spread: ``judge_repeats``).

Reads a ``judge`` snapshot (and the essays it judged), writes the Table 5 snapshot and
the report tables under ``<store>/reports/<run_id>/``, and records the run's health
(coverage per model × judge against the floor, ``bench.health``) in its catalog row
(read back by ``runs.health``)."""

from __future__ import annotations

from pathlib import Path

from essaybench.bench.aggregate import export, has_repeats, judge_repeats, table5, trait_means
from essaybench.bench.compliance import compliance_rates, compliance_table
from essaybench.bench.health import DEFAULT_COVERAGE_FLOOR, assess_health
from essaybench.bench.judge.flags import flag_counts
from essaybench.core.contracts import StageOutput
from essaybench.store import Snapshot, Store
from essaybench.store.run_stage import run_stage

STAGE = "aggregate"


def aggregate_stage(store: Store, run_id: str, upstream: Snapshot,
                    coverage_floor: float = DEFAULT_COVERAGE_FLOOR) -> tuple[Snapshot, Path]:
    """Table 5 (weighted, w/o WT), trait means and length compliance; exported as
    Parquet, CSV and Markdown under ``<store>/reports/<run_id>/``. The run's health
    against ``coverage_floor`` goes to the stage run's catalog meta (``run_health``)."""
    upstream.require_stage("judge", f"the {STAGE} stage")
    judgments = upstream.read()
    essays = store.get_snapshot(upstream.upstream_snapshot_ids[0]).read()
    folder = store.root / "reports" / run_id

    def compute() -> StageOutput:
        main = table5(judgments, "score_weighted")
        checked = compliance_table(essays, prompt_column="prompt_text")
        tables = {"table5_weighted": main,
                  "table5_unweighted": table5(judgments, "score_unweighted"),
                  "trait_means": trait_means(judgments),
                  "length_compliance": compliance_rates(checked)}
        if has_repeats(judgments):  # judge.repeats: the spread of the repeated judgments
            tables["judge_repeats"] = judge_repeats(judgments)
        if "essay_flags" in judgments.columns:  # injection and suspicious-score flags
            tables["flags"] = flag_counts(judgments)
        paths = export(tables, folder)
        health = assess_health(essays, judgments, run_id=run_id,
                               coverage_floor=coverage_floor)
        return StageOutput(main, {"reports": sorted(str(p) for p in paths.values())},
                           run_meta={"health": health.model_dump(mode="json")})

    snapshot = run_stage(store, run_id=run_id, stage=STAGE, upstream=[upstream],
                         params={"scores": ["score_weighted", "score_unweighted"]},
                         rows_in=judgments.height, compute=compute)
    return snapshot, folder
