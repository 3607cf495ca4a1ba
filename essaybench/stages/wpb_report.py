"""The ``wpb_report`` stage: the WritingPreferenceBench report (real human labels of 20
LLMs on 204 Chinese prompts), from its data folder; writes a snapshot and
Markdown/CSV/Parquet under ``<store>/reports/<run_id>/wpb_report/``.
"""

from __future__ import annotations

from pathlib import Path

from essaybench.bench.aggregate import export
from essaybench.core.contracts import StageOutput
from essaybench.core.hashing import file_sha256
from essaybench.human.report import build_wpb_report
from essaybench.store import Snapshot, Store
from essaybench.store.run_stage import run_stage

STAGE = "wpb_report"


def wpb_report_stage(store: Store, run_id: str, data_dir: Path, *, seed: int = 0,
                     n_boot: int = 2000) -> tuple[Snapshot, Path]:
    """The WritingPreferenceBench report; the data files' hashes go into the params."""
    hashes = {p.name: file_sha256(p) for p in sorted(Path(data_dir).glob("*.jsonl"))}
    folder = store.root / "reports" / run_id / STAGE

    def compute() -> StageOutput:
        report = build_wpb_report(data_dir, seed=seed, n_boot=n_boot)
        tables = report.tables()
        export(tables, folder)
        path = folder / f"{STAGE}.md"
        path.write_text(report.to_markdown(), encoding="utf-8")
        return StageOutput(report.ranking, {"report": str(path), "headline": report.headline()})

    snapshot = run_stage(store, run_id=run_id, stage=STAGE, upstream=[],
                         params={"data_dir": str(data_dir), "files": hashes, "seed": seed,
                                 "n_boot": n_boot}, compute=compute)
    return snapshot, folder
