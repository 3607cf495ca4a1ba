"""The ``agreement`` stage: how far a run's judge agrees with human annotators.

Reads a run's ``judge`` snapshot and a file of human annotations (pairwise with several
annotators per pair, or absolute scores; see :mod:`essaybench.human.annotations`),
writes a snapshot and Markdown/CSV/Parquet under ``<store>/reports/<run_id>/agreement/``
(tables: :mod:`essaybench.bench.agreement_tables`).
"""

from __future__ import annotations

from pathlib import Path

from essaybench.bench.aggregate import render_markdown
from essaybench.bench.agreement_tables import AgreementParams, build_agreement_tables
from essaybench.core.contracts import StageOutput
from essaybench.core.export import write_report
from essaybench.core.hashing import file_sha256
from essaybench.human.matched import MIN_PROMPTS_FOR_CI
from essaybench.human.run_check import RunEssays, load_checked
from essaybench.store import Snapshot, Store
from essaybench.store.run_stage import run_stage

STAGE = "agreement"


def intro(params: AgreementParams) -> list[str]:
    """What the report's columns mean (README, Statistics, says more)."""
    tiers = ("" if params.tiers is None else
             f" Tiers: {params.tiers if isinstance(params.tiers, str) else params.tiers.values()}"
             + (" (within-prompt ranks by voting score)." if params.kind == "pairwise"
                else " (human scores, each essay's mean)."))
    return [
        "Judge and humans are compared on exactly the annotated essays the judge scored "
        "(`n_essays`, `n_prompts`, `n_models`; `n_unjudged` annotated essays had no ok "
        "judge score and are left out of both sides).",
        "`method` = `model means`: Spearman ρ / Kendall τ-b between the human and the "
        "judge per-model scores (p two-sided; `n_used` = models). `per-prompt mean`: the "
        "same correlations within each prompt, averaged over the `n_used` prompts that have "
        f"one; `_lo`/`_hi` the 95% t-interval over those prompts, given from "
        f"{MIN_PROMPTS_FOR_CI} prompts on." + tiers,
        "",
    ]


def agreement_stage(store: Store, run_id: str, params: AgreementParams,
                    judged: Snapshot) -> tuple[Snapshot, Path]:
    """Agreement of ``judged`` (a judge snapshot of ``run_id``) with ``params``'s annotation
    file, checked against the run first (``human.run_check``): a row naming a prompt, a
    model or an essay the run does not have, or a score off the scale, is an
    ``AnnotationFileError`` naming file and line, unless ``params.ignore_unknown`` (then
    those rows are left out, counted in the meta as ``dropped``, and ``note`` says which)."""
    judged.require_stage("judge", STAGE)
    path = Path(params.annotations)
    judgments = judged.read()
    checked = load_checked(path, params.kind, RunEssays.from_judgments(run_id, judgments),
                           scale=params.score_scale(), ignore_unknown=params.ignore_unknown)
    annotations = checked.table
    params = params.model_copy(update={"annotations_sha256": file_sha256(path)})
    folder = store.root / "reports" / run_id / STAGE
    accounted = {"dropped": checked.dropped, "note": checked.note}

    def compute() -> StageOutput:
        tables = build_agreement_tables(annotations, judgments, params)
        report = write_report(tables, folder, f"Judge–human agreement ({params.kind} annotations, "
                                         f"{path.name})", intro=intro(params),
                              render=render_markdown)
        main = tables.get("judge_human", tables["annotators"])
        return StageOutput(main, {"report": str(report), "tables": sorted(tables), **accounted},
                           run_meta=accounted)

    snapshot = run_stage(store, run_id=run_id, stage=STAGE, upstream=[judged], params=params,
                         rows_in=annotations.height + checked.dropped, compute=compute)
    return snapshot, folder
