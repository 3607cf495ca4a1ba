"""Which essays of a run humans check this week.

An essay is *flagged* when the injection detector or the judgment checks flagged it
(``essay_flags`` / ``judgment_flags`` not ``[]``); *disputed* when its judges disagree: the
repeat spread (``score_spread``) or the gap to the second opinion (``second_score``) is at
least ``dispute_margin`` points (0–100 scale); *borderline* when its score lies within
``border_margin`` points of its model's median score in the run (the essays whose place
above or below the model's typical essay a judge error would flip). Priority: flagged,
then disputed, then borderline, then the rest.

Items are taken round-robin over the model × genre strata (sorted), each stratum in
priority order and, within a priority, in a seeded pseudo-random order
(``sha256(seed, essay key)``), so the same run, seed and ``n`` give the same items.
Only essays the judge scored (status ok) are eligible.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import polars as pl

PRIORITIES = ("flagged", "disputed", "borderline", "other")


@dataclass(frozen=True)
class SampleParams:
    n: int
    seed: int = 0
    score: str = "score_weighted"
    dispute_margin: float = 10.0
    border_margin: float = 5.0

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}")


def _flagged(value: object) -> bool:
    return value not in (None, "", "[]") and bool(json.loads(str(value)))


def _order_key(seed: int, prompt_id: str, model: str, sample: int) -> str:
    return hashlib.sha256(f"{seed}\x00{prompt_id}\x00{model}\x00{sample}".encode()).hexdigest()


def priorities(judged: pl.DataFrame, params: SampleParams) -> pl.DataFrame:
    """The ok rows of one judge with a ``priority`` column (one of :data:`PRIORITIES`)."""
    ok = judged.filter((pl.col("status") == "ok") & pl.col(params.score).is_not_null())
    if "sample_index" not in ok.columns:
        ok = ok.with_columns(pl.lit(0, dtype=pl.Int64).alias("sample_index"))
    for column in ("essay_flags", "judgment_flags", "score_spread", "second_score"):
        if column not in ok.columns:
            ok = ok.with_columns(pl.lit(None).alias(column))
    median = pl.col(params.score).median().over("model")
    ok = ok.with_columns(
        (pl.col(params.score) - median).abs().alias("_to_median"),
        (pl.col(params.score) - pl.col("second_score").cast(pl.Float64)).abs().alias("_gap"))
    rows = []
    for row in ok.iter_rows(named=True):
        flagged = _flagged(row["essay_flags"]) or _flagged(row["judgment_flags"])
        spread = max(float(row["score_spread"] or 0.0), float(row["_gap"] or 0.0))
        if flagged:
            priority = "flagged"
        elif spread >= params.dispute_margin:
            priority = "disputed"
        elif row["_to_median"] <= params.border_margin:
            priority = "borderline"
        else:
            priority = "other"
        rows.append(priority)
    return ok.drop("_to_median", "_gap").with_columns(
        pl.Series("priority", rows, dtype=pl.Utf8))


def select_items(judged: pl.DataFrame, params: SampleParams) -> pl.DataFrame:
    """Up to ``params.n`` essays (module docstring), with ``priority`` and ``stratum``.

    ``judged`` holds one judge's rows (a judge snapshot filtered to one judge)."""
    if "judge" in judged.columns and judged["judge"].n_unique() > 1:
        raise ValueError(f"one judge's rows needed, got {sorted(judged['judge'].unique())}")
    rows = priorities(judged, params)
    rank = {p: i for i, p in enumerate(PRIORITIES)}
    rows = rows.with_columns(
        pl.col("priority").replace_strict(rank, return_dtype=pl.Int64).alias("_rank"),
        pl.Series("_key", [_order_key(params.seed, p, m, int(s)) for p, m, s in
                           rows.select("prompt_id", "model", "sample_index").iter_rows()],
                  dtype=pl.Utf8),
        pl.concat_str("model", pl.lit(" × "), "genre").alias("stratum"))
    queues = {str(k[0]): group.sort("_rank", "_key")
              for k, group in rows.group_by("stratum")}
    picked: list[pl.DataFrame] = []
    depth = 0
    while len(picked) < params.n and any(depth < q.height for q in queues.values()):
        for stratum in sorted(queues):
            queue = queues[stratum]
            if depth < queue.height and len(picked) < params.n:
                picked.append(queue.slice(depth, 1))
        depth += 1
    if not picked:
        return rows.drop("_rank", "_key").clear()
    return pl.concat(picked).drop("_rank", "_key")
