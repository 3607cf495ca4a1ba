"""This week against last week: score changes with paired CIs, and drift of model ids.

``compare_runs`` lines up two runs' judgments per (judge, model): the overall mean of
each run (ok rows only, coverage beside it), and the change with its paired t-interval,
both over the prompts both runs scored (per prompt, this week's mean minus last week's:
paired by prompt, so a harder prompt mix cannot pass for a regression). The change is
``common_mean_now − common_mean_before``, the means of the per-prompt means over those
``n_common_prompts`` prompts, never the difference of the whole-run means: a baseline
with fewer prompts (or a prompt failed in one run) would otherwise show a change its own
interval contradicts ("+3.40 [+0.00, +0.00]", issue 28). It is
the cluster t-interval of :mod:`essaybench.stats.cluster_t`, with its rules: no
interval below :data:`~essaybench.stats.cluster_t.MIN_PROMPTS` common prompts, and a
change that is the same on every prompt is decided ([d, d]). The percentile bootstrap
it replaces covers ≈ 92% at 15 prompts (issue 25 item 11). ``n_boot`` and ``seed`` are
accepted for old callers and not used. It also flags drift: the model id
the API returned for the writer or the judge differs between the runs — the usual
reason a score moves while nobody changed a config.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from essaybench.core.contracts import OK
from essaybench.stats.cluster_t import cluster_t_differences

COMPARE_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    "judge": pl.Utf8, "model": pl.Utf8, "mean_now": pl.Float64, "mean_before": pl.Float64,
    "coverage_now": pl.Float64, "coverage_before": pl.Float64,
    "common_mean_now": pl.Float64, "common_mean_before": pl.Float64, "delta": pl.Float64,
    "delta_lo": pl.Float64, "delta_hi": pl.Float64, "n_common_prompts": pl.Int64,
    "significant": pl.Boolean, "model_ids_now": pl.Utf8, "model_ids_before": pl.Utf8,
    "judge_ids_now": pl.Utf8, "judge_ids_before": pl.Utf8, "drift": pl.Utf8,
}


def _ids(rows: pl.DataFrame, column: str) -> str:
    if column not in rows.columns:
        return ""
    return ",".join(sorted({str(v) for v in rows[column].drop_nulls().to_list()}))


def _per_prompt(rows: pl.DataFrame, score: str) -> dict[str, float]:
    ok = rows.filter((pl.col("status") == OK) & pl.col(score).is_not_null())
    return {str(p): float(v) for p, v in
            ok.group_by("prompt_id").agg(pl.col(score).mean()).iter_rows()}


def _mean_cov(rows: pl.DataFrame, score: str) -> tuple[float | None, float | None]:
    if rows.height == 0:
        return None, None
    ok = rows.filter((pl.col("status") == OK) & pl.col(score).is_not_null())
    mean = ok[score].mean() if ok.height else None
    return (float(mean) if isinstance(mean, (int, float)) else None), ok.height / rows.height


def compare_runs(now: pl.DataFrame, before: pl.DataFrame, *, score: str = "score_weighted",
                 essays_now: pl.DataFrame | None = None,
                 essays_before: pl.DataFrame | None = None, n_boot: int = 2000,
                 level: float = 0.95, seed: int = 0) -> pl.DataFrame:
    """One row per (judge, model) present in either run (pure)."""
    keys = sorted(set(now.select("judge", "model").unique().iter_rows())
                  | set(before.select("judge", "model").unique().iter_rows()))
    rows: list[dict[str, object]] = []
    for judge, model in keys:
        mine_now = now.filter((pl.col("judge") == judge) & (pl.col("model") == model))
        mine_before = before.filter((pl.col("judge") == judge) & (pl.col("model") == model))
        m_now, c_now = _mean_cov(mine_now, score)
        m_before, c_before = _mean_cov(mine_before, score)
        p_now, p_before = _per_prompt(mine_now, score), _per_prompt(mine_before, score)
        common = sorted(set(p_now) & set(p_before))
        lo = hi = c_mean_now = c_mean_before = delta = None
        if common:
            values = np.array([[p_now[p], p_before[p]] for p in common])
            c_mean_now, c_mean_before = (float(v) for v in values.mean(axis=0))
            res = cluster_t_differences(values, np.ones_like(values), np.array([0]),
                                        np.array([1]), level=level)
            delta = float(res.estimate[0])  # = c_mean_now − c_mean_before: the interval's
            if np.isfinite(res.lo[0]):
                lo, hi = float(res.lo[0]), float(res.hi[0])
        w_now = _ids(essays_now.filter(pl.col("model") == model), "returned_model") \
            if essays_now is not None else ""
        w_before = _ids(essays_before.filter(pl.col("model") == model), "returned_model") \
            if essays_before is not None else ""
        j_now = _ids(mine_now, "judge_returned_model")
        j_before = _ids(mine_before, "judge_returned_model")
        drift = [what for what, a, b in (("model", w_now, w_before), ("judge", j_now, j_before))
                 if a and b and a != b]
        rows.append({
            "judge": judge, "model": model, "mean_now": m_now, "mean_before": m_before,
            "coverage_now": c_now, "coverage_before": c_before,
            "common_mean_now": c_mean_now, "common_mean_before": c_mean_before,
            "delta": delta,
            "delta_lo": lo, "delta_hi": hi, "n_common_prompts": len(common),
            "significant": None if lo is None or hi is None else bool(lo > 0 or hi < 0),
            "model_ids_now": w_now, "model_ids_before": w_before,
            "judge_ids_now": j_now, "judge_ids_before": j_before,
            "drift": ",".join(drift) or None})
    return pl.DataFrame(rows, schema=COMPARE_SCHEMA)
