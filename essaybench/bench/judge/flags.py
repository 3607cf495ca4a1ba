"""Flags on a judge table: essays that try to steer the judge, judgments that look steered.

Pure. Two columns are added to the judge stage's table, both JSON lists of codes (empty:
nothing found), and neither changes a score or a status — a flag asks for a second look
(a second judge, repeats), it is never a verdict:

- ``essay_flags``: :func:`~essaybench.bench.judge.injection.essay_flags` of the essay
  (every row, judged or not);
- ``judgment_flags`` (ok rows): ``all_max`` (every sub-question at the maximum),
  ``zero_variance`` (every sub-question the same score), ``outlier_high`` (the essay's
  score is far above the same judge's other scores of the same model's essays: more than
  ``OUTLIER_Z`` robust z-scores and ``OUTLIER_POINTS`` points above their median, with at
  least ``OUTLIER_MIN_OTHERS`` other essays).

:func:`flag_counts` is the per model × judge summary the reports show.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl

from essaybench.bench.judge.injection import essay_flags
from essaybench.core.contracts import OK

OUTLIER_Z = 3.5
OUTLIER_POINTS = 15.0
OUTLIER_MIN_OTHERS = 5
JUDGMENT_FLAGS = ("all_max", "zero_variance", "outlier_high")


def _score_flags(scores_json: str | None, top: int) -> list[str]:
    if not scores_json:
        return []
    values = list(json.loads(scores_json).values())
    if not values:
        return []
    flags = []
    if all(v == top for v in values):
        flags.append("all_max")
    if len(values) > 1 and len(set(values)) == 1:
        flags.append("zero_variance")
    return flags


def _outliers(table: pl.DataFrame, score: str) -> set[int]:
    """Row indices whose ``score`` is far above their (model, judge)'s other ok scores."""
    found: set[int] = set()
    ok = table.with_row_index("_row").filter((pl.col("status") == OK)
                                             & pl.col(score).is_not_null())
    for _, group in ok.group_by("model", "judge"):
        values = group[score].to_numpy().astype(np.float64)
        rows = group["_row"].to_list()
        for i, x in enumerate(values):
            others = np.delete(values, i)
            if len(others) < OUTLIER_MIN_OTHERS:
                continue
            median = float(np.median(others))
            mad = 1.4826 * float(np.median(np.abs(others - median)))
            if x - median >= OUTLIER_POINTS and (mad == 0 or (x - median) / mad > OUTLIER_Z):
                found.add(int(rows[i]))
    return found


def add_flags(table: pl.DataFrame, essays: pl.DataFrame, score_max: int,
              score: str = "score_weighted") -> pl.DataFrame:
    """``table`` (judge-stage rows) with ``essay_flags`` and ``judgment_flags``; ``essays``
    holds the judged texts (prompt_id, model, sample_index, prompt_text, essay_text)."""
    texts: dict[tuple[str, str, int], list[str]] = {}
    for pid, model, idx, prompt, essay in essays.select(
            "prompt_id", "model", "sample_index", "prompt_text", "essay_text").iter_rows():
        texts[(pid, model, int(idx))] = essay_flags(str(prompt or ""), str(essay or ""))
    outliers = _outliers(table, score) if score in table.columns else set()
    essay_col, judgment_col = [], []
    for i, (pid, model, idx, status, scores) in enumerate(table.select(
            "prompt_id", "model", "sample_index", "status", "scores").iter_rows()):
        essay_col.append(json.dumps(texts.get((pid, model, int(idx)), [])))
        flags = _score_flags(scores, score_max) if status == OK else []
        if i in outliers:
            flags.append("outlier_high")
        judgment_col.append(json.dumps(flags))
    return table.with_columns(pl.Series("essay_flags", essay_col, dtype=pl.Utf8),
                              pl.Series("judgment_flags", judgment_col, dtype=pl.Utf8))


def flagged(table: pl.DataFrame) -> pl.Series:
    """Whether each row has any essay or judgment flag."""
    return (pl.Series([v != "[]" for v in table["essay_flags"]])
            | pl.Series([v != "[]" for v in table["judgment_flags"]]))


def flag_counts(table: pl.DataFrame) -> pl.DataFrame:
    """Per model × judge: rows, essays flagged (any code, and per code), judgments flagged."""
    rows: list[dict[str, object]] = []
    for (model, judge), group in sorted(table.group_by("model", "judge"),
                                        key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        codes: dict[str, int] = {}
        n_essay = n_judgment = 0
        for e, j in group.select("essay_flags", "judgment_flags").iter_rows():
            e_codes, j_codes = json.loads(e or "[]"), json.loads(j or "[]")
            n_essay += bool(e_codes)
            n_judgment += bool(j_codes)
            for code in (*e_codes, *j_codes):
                codes[code] = codes.get(code, 0) + 1
        rows.append({"model": model, "judge": judge, "rows": group.height,
                     "essays_flagged": n_essay, "judgments_flagged": n_judgment,
                     "codes": ", ".join(f"{c} ×{n}" for c, n in sorted(codes.items()))})
    return pl.DataFrame(rows, schema={"model": pl.Utf8, "judge": pl.Utf8, "rows": pl.Int64,
                                      "essays_flagged": pl.Int64,
                                      "judgments_flagged": pl.Int64, "codes": pl.Utf8})
