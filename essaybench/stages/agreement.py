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
from essaybench.human.annotations import load_absolute, load_pairwise
from essaybench.store import Snapshot, Store
from essaybench.store.run_stage import run_stage

STAGE = "agreement"


def agreement_stage(store: Store, run_id: str, params: AgreementParams,
                    judged: Snapshot) -> tuple[Snapshot, Path]:
    judged.require_stage("judge", STAGE)
    path = Path(params.annotations)
    annotations = (load_pairwise if params.kind == "pairwise" else load_absolute)(path)
    params = params.model_copy(update={"annotations_sha256": file_sha256(path)})
    judgments = judged.read()
    folder = store.root / "reports" / run_id / STAGE

    def compute() -> StageOutput:
        tables = build_agreement_tables(annotations, judgments, params)
        report = write_report(tables, folder, f"Judge–human agreement ({params.kind} annotations, "
                                         f"{path.name})", render=render_markdown)
        main = tables.get("judge_human", tables["annotators"])
        return StageOutput(main, {"report": str(report), "tables": sorted(tables)})

    snapshot = run_stage(store, run_id=run_id, stage=STAGE, upstream=[judged], params=params,
                         rows_in=annotations.height, compute=compute)
    return snapshot, folder
