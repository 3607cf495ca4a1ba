"""95% CIs for every Table 5 cell and paired differences between models, prompts as clusters.

For each judge, prompts are the unit of sampling. Each prompt contributes the sum and
the count of its ``status == "ok"`` scores (one per essay sample), and a cell mean is
Σ sums / Σ counts: with the same number of samples per prompt this is the mean of
per-prompt sample averages, and in every case it is exactly
:func:`essaybench.bench.aggregate.table5`'s mean (the pooled mean over ok rows). Failed
rows are never imputed; they only change ``n``.

Method (``method="cluster_t"``, the default): the t-interval on prompt clusters of
:mod:`essaybench.stats.cluster_t`, chosen by ``benchmarks/ci_coverage.py`` because it
covers 94–96% from 15 to 150 prompts per cell where the percentile bootstrap covers
≈ 92% at 15. Differences between two models use the per-prompt differences of their
influences on the same prompts (paired). ``method="percentile"`` keeps the seeded
prompt bootstrap (a replicate draws prompts with replacement and recomputes every
(model, cell) mean from the same draw, so differences stay paired; percentile bounds).

A cell with fewer than :data:`~essaybench.stats.cluster_t.MIN_PROMPTS` prompts, or no
spread across its prompts, gets null bounds and says why in ``ci_note`` (``diff_note``
for a difference); reports print the note instead of an interval.

Small cells (issue 25 item 8). A cell mean with an interval but fewer than
:data:`SMALL_CELL_PROMPTS` prompts carries ``ci_caveat`` (:data:`SMALL_CELL_CAVEAT`): on
the heavy-lower-tail simulator built from WritingPreferenceBench's human scores
(``benchmarks/ci_coverage.py --heavy-tail``: off-task essays scoring ~35) the cluster
t-interval of a cell mean covered 93.4% at 8 prompts, 93.7% at 15 and 94.3% at 30 (its
most skewed model 88.6%, 90.6%, 92.2%; 4,000 cells per size, MC SE ≈ 0.13%), then 94.4%
at 60 (worst 94.1%; within one MC SE of 94.5%) and 95.0% at 150. Neither a
skew-corrected t (Johnson's, Hall's) nor the studentized or BCa
bootstrap reached 94.5% at 15 prompts there (Hall 94.3%, studentized 94.4%), so the
t-interval stays and the limit is stated next to each such cell (the report marks it †).
Paired differences covered 94.8–95.0% at every size and carry no caveat.

Cells are named as in Table 5: ``overall`` and ``<genre>/<prompt_set>``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import combinations
from typing import Literal

import numpy as np
import polars as pl

from essaybench.core.contracts import OK, OVERALL, cells
from essaybench.stats.bootstrap import (
    as_generator,
    check_level,
    check_n_boot,
    paired_bootstrap_ratio,
    percentile_bounds,
)
from essaybench.stats.cluster_t import (
    MIN_PROMPTS,
    NOTE_NO_SCORE,
    NOTE_TOO_FEW,
    ClusterT,
    cluster_t_differences,
    cluster_t_means,
)

Method = Literal["cluster_t", "percentile"]
METHODS: tuple[Method, ...] = ("cluster_t", "percentile")
CI_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    "judge": pl.Utf8, "model": pl.Utf8, "cell": pl.Utf8, "mean": pl.Float64,
    "ci_lo": pl.Float64, "ci_hi": pl.Float64, "n": pl.Int64, "n_prompts": pl.Int64,
    "ci_note": pl.Utf8, "ci_caveat": pl.Utf8,
}
SMALL_CELL_PROMPTS = 60
SMALL_CELL_CAVEAT = (f"fewer than {SMALL_CELL_PROMPTS} prompts: if scores have a heavy lower "
                     "tail (e.g. off-task essays) this 95% interval may cover only 93.4–94.3% "
                     "(89–92% for the most skewed model; benchmarks/ci_coverage.py "
                     "--heavy-tail)")
PAIR_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    "judge": pl.Utf8, "cell": pl.Utf8, "model_a": pl.Utf8, "model_b": pl.Utf8,
    "diff": pl.Float64, "diff_lo": pl.Float64, "diff_hi": pl.Float64,
    "indistinguishable": pl.Boolean, "diff_note": pl.Utf8,
}


@dataclass(frozen=True)
class ScoreCIs:
    """``cells``: one row per (judge, model, cell); ``pairs``: one row per (judge, cell,
    model_a, model_b) with the paired difference a − b and its CI."""

    cells: pl.DataFrame
    pairs: pl.DataFrame
    level: float
    n_boot: int
    method: Method = "cluster_t"


def _judge_matrices(rows: pl.DataFrame, models: list[str], cell_names: list[str],
                    score: str) -> tuple[np.ndarray, np.ndarray, int]:
    """(n_prompts, n_models × n_cells) sums and counts of ok scores, column = m·C + c."""
    prompts = sorted({str(p) for p in rows["prompt_id"].to_list()})
    p_index = {p: i for i, p in enumerate(prompts)}
    m_index = {m: i for i, m in enumerate(models)}
    c_index = {c: i for i, c in enumerate(cell_names)}
    n_cells = len(cell_names)
    sums = np.zeros((len(prompts), len(models) * n_cells))
    counts = np.zeros_like(sums)
    ok = rows.filter((pl.col("status") == OK) & pl.col(score).is_not_null())
    p = np.array([p_index[str(x)] for x in ok["prompt_id"].to_list()], dtype=np.intp)
    m = np.array([m_index[str(x)] for x in ok["model"].to_list()], dtype=np.intp)
    values = ok[score].cast(pl.Float64).to_numpy()
    # A row counts in its model's overall column and, when it has both labels, in its
    # genre/prompt_set column.
    cell = np.array([c_index[f"{g}/{s}"] if g is not None and s is not None else -1
                     for g, s in zip(ok["genre"].to_list(), ok["prompt_set"].to_list(),
                                     strict=True)], dtype=np.intp)
    labelled = cell >= 0
    overall = m * n_cells + c_index[OVERALL]
    in_cell = m[labelled] * n_cells + cell[labelled]
    # np.add.at adds in row order, so every sum is the same float a row-by-row loop makes.
    np.add.at(sums, (p, overall), values)
    np.add.at(counts, (p, overall), 1.0)
    np.add.at(sums, (p[labelled], in_cell), values[labelled])
    np.add.at(counts, (p[labelled], in_cell), 1.0)
    return sums, counts, len(prompts)


def _floats(values: np.ndarray) -> pl.Series:
    """NaN (no ok score, no interval) as null."""
    return pl.Series(values, dtype=pl.Float64).fill_nan(None)


def _notes(notes: list[str]) -> pl.Series:
    """An empty note (there is an interval) as null."""
    return pl.Series([n or None for n in notes], dtype=pl.Utf8)


def _caveats(res: ClusterT) -> pl.Series:
    """:data:`SMALL_CELL_CAVEAT` for a cell with an interval over fewer than
    :data:`SMALL_CELL_PROMPTS` prompts, else null."""
    small = np.isfinite(res.lo) & (res.n_prompts < SMALL_CELL_PROMPTS)
    return pl.Series([SMALL_CELL_CAVEAT if s else None for s in small.tolist()],
                     dtype=pl.Utf8)


def _intervals(sums: np.ndarray, counts: np.ndarray, first: np.ndarray, second: np.ndarray,
               method: Method, n_boot: int, level: float, rng: np.random.Generator
               ) -> tuple[ClusterT, ClusterT]:
    """(cell intervals, paired-difference intervals) by ``method``."""
    cells_t = cluster_t_means(sums, counts, level=level)
    pairs_t = cluster_t_differences(sums, counts, first, second, level=level)
    if method == "cluster_t":
        return cells_t, pairs_t
    res = paired_bootstrap_ratio(sums, counts, n_boot=n_boot, level=level, seed=rng)
    # All pairs' percentile bounds in one call: column by column the same numbers as
    # difference_ci on each pair (tested), without a quantile call per pair.
    los, his = (percentile_bounds(res.boot[:, first] - res.boot[:, second], level)
                if len(first) else (np.empty(0), np.empty(0)))
    # The same cells say "n too small" as with the t-interval; the bootstrap's zero-width
    # interval of a cell without spread is its own (and it is what the method gives).
    enough = cells_t.n_prompts >= MIN_PROMPTS
    told = enough[first] & enough[second]
    boot_notes = [NOTE_NO_SCORE if n == 0 else "" if e else NOTE_TOO_FEW
                  for n, e in zip(cells_t.n_prompts.tolist(), enough.tolist(), strict=True)]
    pair_notes = ["" if t else note if note == NOTE_NO_SCORE else NOTE_TOO_FEW
                  for note, t in zip(pairs_t.note, told.tolist(), strict=True)]
    return (replace(cells_t, lo=np.where(enough, res.lo, np.nan),
                    hi=np.where(enough, res.hi, np.nan), note=boot_notes),
            replace(pairs_t, lo=np.where(told, los, np.nan), hi=np.where(told, his, np.nan),
                    note=pair_notes))


def score_cis(judgments: pl.DataFrame, score: str = "score_weighted", *, n_boot: int = 2000,
              level: float = 0.95, seed: int | np.random.Generator = 0,
              method: Method = "cluster_t") -> ScoreCIs:
    """Mean and 95% CI for every (judge, model, cell) of Table 5, and paired differences.

    ``n_boot`` and ``seed`` matter only for ``method="percentile"`` (judges are then
    processed in sorted order from one generator, so the output is a function of
    (judgments, seed)); the default t-interval is deterministic. A cell with no ok score
    has null mean and CI.
    """
    level, n_boot = check_level(level), check_n_boot(n_boot)
    if method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)}, got {method!r}")
    rng = as_generator(seed)
    cell_names = [OVERALL, *cells(judgments)]
    n_cells = len(cell_names)
    # Only the columns read here: filtering the whole table per judge would copy every
    # raw reply.
    judgments = judgments.select("judge", "model", "prompt_id", "genre", "prompt_set",
                                 "status", score)
    ci_frames: list[pl.DataFrame] = []
    pair_frames: list[pl.DataFrame] = []
    for judge in sorted({str(j) for j in judgments["judge"].to_list()}):
        rows = judgments.filter(pl.col("judge") == judge)
        models = sorted({str(m) for m in rows["model"].to_list()})
        sums, counts, _ = _judge_matrices(rows, models, cell_names, score)
        # Column k = m·C + c, so models repeat per cell block and cells cycle within it.
        pairs = [(model_a, model_b, cell, a * n_cells + c, b * n_cells + c)
                 for (a, model_a), (b, model_b) in combinations(enumerate(models), 2)
                 for c, cell in enumerate(cell_names)]
        first = np.array([p[3] for p in pairs], dtype=np.intp)
        second = np.array([p[4] for p in pairs], dtype=np.intp)
        cell_ci, diff_ci = _intervals(sums, counts, first, second, method, n_boot, level, rng)
        ci_frames.append(pl.DataFrame({
            "judge": [judge] * len(models) * n_cells,
            "model": [model for model in models for _ in cell_names],
            "cell": cell_names * len(models),
            "mean": _floats(cell_ci.estimate),
            "ci_lo": _floats(cell_ci.lo), "ci_hi": _floats(cell_ci.hi),
            "n": counts.sum(axis=0).astype(np.int64), "n_prompts": cell_ci.n_prompts,
            "ci_note": _notes(cell_ci.note),
            "ci_caveat": _caveats(cell_ci)},
            schema=CI_SCHEMA))
        # No interval (too few prompts): the data cannot tell the two apart. A constant
        # difference has the interval [d, d]: decided unless d = 0.
        los, his = diff_ci.lo, diff_ci.hi
        pair_frames.append(pl.DataFrame({
            "judge": [judge] * len(pairs), "cell": [p[2] for p in pairs],
            "model_a": [p[0] for p in pairs], "model_b": [p[1] for p in pairs],
            "diff": _floats(diff_ci.estimate),
            "diff_lo": _floats(los), "diff_hi": _floats(his),
            "indistinguishable": np.isnan(los) | ((los <= 0.0) & (his >= 0.0)),
            "diff_note": _notes(diff_ci.note)},
            schema=PAIR_SCHEMA))
    return ScoreCIs(cells=pl.concat([pl.DataFrame(schema=CI_SCHEMA), *ci_frames],
                                    rechunk=True),
                    pairs=pl.concat([pl.DataFrame(schema=PAIR_SCHEMA), *pair_frames],
                                    rechunk=True),
                    level=level, n_boot=n_boot, method=method)
