"""The ``stats`` stage: is a difference real? Confidence intervals, rankings and bias monitors.

Reads a run's ``judge`` snapshot (and its essays, for lengths) and, when there is one,
its ``pairwise`` snapshot; writes one ``stats`` snapshot (every Table 5 cell with its
seeded, prompt-level paired bootstrap CI, per scoring variant) and the report tables
under ``<store>/reports/<run_id>/stats/`` as Parquet, CSV and Markdown, with
``stats.md`` gathering them:

* ``score_ci_<variant>``: mean and CI per (judge, model, cell) — weighted, w/o WT,
  Align-Score, whichever the judgments carry;
* ``score_diff_<variant>``: paired differences between models in the same cell, and
  whether they are distinguishable at this sample size;
* ``length_bias``: score–length slope and correlations per judge × genre;
* ``self_preference``: own-family vs other scores per judge (families from the registry);
* from pairwise judging: ``win_rates``, ``bradley_terry`` ranking, ``position_bias``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from essaybench.aggregate import export
from essaybench.constraints.counting import count_chinese_chars
from essaybench.curate.table import StageOutput
from essaybench.pairwise_tables import position_bias
from essaybench.stages import run_stage
from essaybench.stats.bias import length_bias, self_preference
from essaybench.stats.bradley_terry import ranking_table
from essaybench.stats.score_ci import score_cis
from essaybench.stats.winrate import win_rates
from essaybench.store import Snapshot, Store

STAGE = "stats"
VARIANTS = {"score_weighted": "weighted", "score_unweighted": "unweighted",
            "align_total": "align_score"}
ESSAY_KEYS = ("prompt_id", "model", "sample_index")


class StatsParams(BaseModel):
    """How the intervals are computed. Same params + same snapshots → same numbers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n_boot: int = Field(default=2000, ge=100, description="Bootstrap replicates.")
    level: float = Field(default=0.95, gt=0.5, lt=1.0, description="Interval level.")
    seed: int = Field(default=0, description="Seed of every resampling in the stage.")
    baseline: str | None = Field(
        default=None, description="Model whose Bradley–Terry rating is pinned at 1000 "
                                  "(default: ratings centred on 1000).")


def _with_lengths(judgments: pl.DataFrame, essays: pl.DataFrame, score: str) -> pl.DataFrame:
    """The judgments columns length bias reads, with each essay's length beside them."""
    # A plain comprehension: map_elements costs more per essay than the count itself.
    counts = [count_chinese_chars(t) if t is not None else None
              for t in essays["essay_text"].to_list()]
    lengths = essays.select(*ESSAY_KEYS).with_columns(
        pl.Series("length_chars", counts, dtype=pl.Int64))
    return (judgments.select(*ESSAY_KEYS, "judge", "genre", "status", score)
            .join(lengths, on=list(ESSAY_KEYS), how="left"))


def build_stats_tables(judgments: pl.DataFrame, essays: pl.DataFrame,
                       pairwise: pl.DataFrame | None, params: StatsParams,
                       family_of: Mapping[str, str]) -> dict[str, pl.DataFrame]:
    """Every report table of the stage (pure: no store, no IO)."""
    tables: dict[str, pl.DataFrame] = {}
    kw: dict[str, Any] = {"n_boot": params.n_boot, "level": params.level, "seed": params.seed}
    for column, variant in VARIANTS.items():
        if column not in judgments.columns or judgments[column].null_count() == judgments.height:
            continue
        cis = score_cis(judgments, column, **kw)
        tables[f"score_ci_{variant}"] = cis.cells
        tables[f"score_diff_{variant}"] = cis.pairs
    if "score_weighted" in judgments.columns and judgments.height:
        with_lengths = _with_lengths(judgments, essays, "score_weighted")
        tables["length_bias"] = length_bias(with_lengths, "score_weighted")
        tables["self_preference"] = self_preference(judgments, family_of, "score_weighted", **kw)
    if pairwise is not None and pairwise.height:
        tables["win_rates"] = win_rates(pairwise, baseline=params.baseline, **kw)
        tables["bradley_terry"] = ranking_table(pairwise, anchor=params.baseline, **kw)
        tables["position_bias"] = position_bias(pairwise)
    return tables


def main_table(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The snapshot's table: every score CI cell, one ``variant`` column."""
    frames = [df.select(pl.lit(name.removeprefix("score_ci_")).alias("variant"), pl.all())
              for name, df in tables.items() if name.startswith("score_ci_")]
    return pl.concat(frames) if frames else pl.DataFrame(schema={"variant": pl.Utf8})


def write_report(tables: dict[str, pl.DataFrame], folder: Path) -> Path:
    """Export every table and gather their Markdown into ``stats.md``; returns its path."""
    paths = export(tables, folder)
    parts = ["# Statistics\n",
             "Seeded bootstrap intervals resample prompts (paired across models; the two "
             "orders of a pairwise comparison stay together). 'indistinguishable' = the "
             "interval of the difference contains 0 (win rate: 0.5).\n"]
    parts += [paths[f"{name}.md"].read_text(encoding="utf-8") for name in tables]
    report = folder / "stats.md"
    report.write_text("\n".join(parts), encoding="utf-8")
    return report


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
                family_of: Mapping[str, str] | None = None) -> tuple[Snapshot, Path]:
    """Run the stage over a ``judge`` snapshot (and optionally a ``pairwise`` one)."""
    judged.require_stage("judge", STAGE)
    if pairwise is not None:
        pairwise.require_stage("pairwise", STAGE)
    judgments = judged.read()
    essays = store.get_snapshot(judged.upstream_snapshot_ids[0]).read()
    pairs = pairwise.read() if pairwise is not None else None
    folder = store.root / "reports" / run_id / STAGE
    upstream = [judged, *([pairwise] if pairwise is not None else [])]

    def compute() -> StageOutput:
        tables = build_stats_tables(judgments, essays, pairs, params, family_of or {})
        report = write_report(tables, folder)
        return StageOutput(main_table(tables), {"report": str(report),
                                                "tables": sorted(tables)})

    snapshot = run_stage(store, run_id=run_id, stage=STAGE, upstream=upstream, params=params,
                         rows_in=judgments.height, compute=compute)
    return snapshot, folder
