"""Bootstrap 95% CIs for every Table 5 cell, resampling prompts jointly across models.

For each judge, prompts are the resampling unit: a replicate draws that judge's
prompts with replacement and recomputes every (model, cell) mean from the same
draw, so differences between models keep their pairing. Each prompt contributes
the sum and the count of its ``status == "ok"`` scores (one per essay sample),
and a cell mean is Σ sums / Σ counts: with the same number of samples per
prompt this is the mean of per-prompt sample averages, and in every case it is
exactly :func:`essaybench.aggregate.table5`'s mean (the pooled mean over ok rows).
Failed rows are never imputed; they only change ``n``.

Cells are named as in Table 5: ``overall`` and ``<genre>/<prompt_set>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import polars as pl

from essaybench.aggregate import OK, OVERALL, cells
from essaybench.stats.bootstrap import (
    as_generator,
    check_level,
    check_n_boot,
    paired_bootstrap_ratio,
    percentile_bounds,
)

MIN_PROMPTS = 2  # prompts with an ok score a cell needs before it gets an interval
CI_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    "judge": pl.Utf8, "model": pl.Utf8, "cell": pl.Utf8, "mean": pl.Float64,
    "ci_lo": pl.Float64, "ci_hi": pl.Float64, "n": pl.Int64, "n_prompts": pl.Int64,
}
PAIR_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    "judge": pl.Utf8, "cell": pl.Utf8, "model_a": pl.Utf8, "model_b": pl.Utf8,
    "diff": pl.Float64, "diff_lo": pl.Float64, "diff_hi": pl.Float64,
    "indistinguishable": pl.Boolean,
}


@dataclass(frozen=True)
class ScoreCIs:
    """``cells``: one row per (judge, model, cell); ``pairs``: one row per (judge, cell,
    model_a, model_b) with the paired difference a − b and its CI."""

    cells: pl.DataFrame
    pairs: pl.DataFrame
    level: float
    n_boot: int


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
    for prompt, model, genre, pset, value in ok.select(
            "prompt_id", "model", "genre", "prompt_set", score).iter_rows():
        p, m = p_index[str(prompt)], m_index[str(model)]
        targets = [c_index[OVERALL]]
        if genre is not None and pset is not None:
            targets.append(c_index[f"{genre}/{pset}"])
        for c in targets:
            sums[p, m * n_cells + c] += float(value)
            counts[p, m * n_cells + c] += 1.0
    return sums, counts, len(prompts)


def score_cis(judgments: pl.DataFrame, score: str = "score_weighted", *, n_boot: int = 2000,
              level: float = 0.95, seed: int | np.random.Generator = 0) -> ScoreCIs:
    """Mean and paired-bootstrap CI for every (judge, model, cell) of Table 5.

    Judges are processed in sorted order from one generator, so the output is a
    function of (judgments, seed). A cell with no ok score has null mean and CI.
    """
    level, n_boot = check_level(level), check_n_boot(n_boot)
    rng = as_generator(seed)
    cell_names = [OVERALL, *cells(judgments)]
    ci_rows: list[dict[str, object]] = []
    pair_rows: list[dict[str, object]] = []
    for judge in sorted({str(j) for j in judgments["judge"].to_list()}):
        rows = judgments.filter(pl.col("judge") == judge)
        models = sorted({str(m) for m in rows["model"].to_list()})
        sums, counts, _ = _judge_matrices(rows, models, cell_names, score)
        res = paired_bootstrap_ratio(sums, counts, n_boot=n_boot, level=level, seed=rng)
        n_cells = len(cell_names)
        for m, model in enumerate(models):
            for c, cell in enumerate(cell_names):
                k = m * n_cells + c
                n_prompts = int((counts[:, k] > 0).sum())
                # One prompt gives every replicate the same mean: a zero-width "interval"
                # that claims certainty. Below MIN_PROMPTS there is no interval.
                ci = n_prompts >= MIN_PROMPTS
                ci_rows.append({
                    "judge": judge, "model": model, "cell": cell,
                    "mean": _num(res.mean[k]), "ci_lo": _num(res.lo[k]) if ci else None,
                    "ci_hi": _num(res.hi[k]) if ci else None, "n": int(counts[:, k].sum()),
                    "n_prompts": n_prompts})
        pairs = [(model_a, model_b, cell, a * n_cells + c, b * n_cells + c)
                 for (a, model_a), (b, model_b) in combinations(enumerate(models), 2)
                 for c, cell in enumerate(cell_names)]
        # All pairs' percentile bounds in one call: column by column the same numbers as
        # difference_ci on each pair (tested), without a quantile call per pair.
        first = np.array([p[3] for p in pairs], dtype=np.intp)
        second = np.array([p[4] for p in pairs], dtype=np.intp)
        los, his = (percentile_bounds(res.boot[:, first] - res.boot[:, second], level)
                    if pairs else (np.empty(0), np.empty(0)))
        enough = (counts > 0).sum(axis=0) >= MIN_PROMPTS
        for (model_a, model_b, cell, i, j), lo, hi in zip(pairs, los, his, strict=True):
            diff = _num(res.mean[i] - res.mean[j])
            if not (enough[i] and enough[j]):
                lo = hi = np.nan  # too few prompts to tell: indistinguishable, no interval
            pair_rows.append({
                "judge": judge, "cell": cell, "model_a": model_a, "model_b": model_b,
                "diff": diff, "diff_lo": _num(lo), "diff_hi": _num(hi),
                "indistinguishable": bool(np.isnan(lo) or lo <= 0.0 <= hi)})
    return ScoreCIs(cells=pl.DataFrame(ci_rows, schema=CI_SCHEMA),
                    pairs=pl.DataFrame(pair_rows, schema=PAIR_SCHEMA),
                    level=level, n_boot=n_boot)


def _num(value: float) -> float | None:
    return None if np.isnan(value) else float(value)
