"""Flags on a judge table: essays that try to steer the judge, judgments that look steered.

Pure. Two columns are added to the judge stage's table, both JSON lists of codes (empty:
nothing found), and neither changes a score or a status — a flag asks for a second look
(a second judge, repeats), it is never a verdict:

- ``essay_flags``: :func:`~essaybench.bench.judge.injection.essay_flags` of the essay
  (every row, judged or not);
- ``judgment_flags`` (ok rows): ``all_max`` (every sub-question at the maximum),
  ``zero_variance`` (every sub-question the same score), ``outlier_high`` (the essay's
  score is far above the same judge's scores of the same model's other essays — see
  :class:`OutlierRule`; it needs no particular answer shape, so a judge that obeys an
  injection with a 9/10 mix is caught as one answering all tens is).

``outlier_high`` compares like with like: where at least two other models' essays on the
same prompt were judged (a benchmark run), each score is first taken relative to the
median of those (the prompt's difficulty, which the writer does not choose, is most of
the spread of a model's scores); then the essay's gap above the median of the model's
other essays must be at least ``points`` and more than ``z`` robust standard deviations
(1.4826 × MAD, floored at ``scale_floor`` points so a model whose scores barely vary does
not flag every small step). ``OUTLIER_RULE`` was chosen on ``benchmarks/score_sim.py``'s
realistic runs (``benchmarks/judge_injection.py`` prints the figures): about 1 % of
clean essays flagged — each costs a second look, not a score — against 0.1 % for the
rule before it (raw scores, z 3.5, 15 points), which caught almost no 9/10-mix
attacks.

:func:`flag_counts` is the per model × judge summary the reports show.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from essaybench.bench.judge.injection import essay_flags
from essaybench.core.contracts import OK

JUDGMENT_FLAGS = ("all_max", "zero_variance", "outlier_high")
# Decided over the whole run (an essay against the others): a shard of a sharded run
# cannot, so it leaves these to the parent's assembly (stages/shard_assemble.py).
WHOLE_RUN_FLAGS = ("outlier_high",)


@dataclass(frozen=True)
class OutlierRule:
    """When a judgment is ``outlier_high`` (module docstring)."""

    z: float = 2.5
    points: float = 10.0
    scale_floor: float = 3.0
    min_others: int = 5
    prompt_relative: bool = True  # relative to the other models' essays on the prompt
    prompt_min_models: int = 2


OUTLIER_RULE = OutlierRule()
RAW_OUTLIER_RULE = OutlierRule(z=3.5, points=15.0, scale_floor=0.0,
                               prompt_relative=False)  # the rule before issue 25 item 13


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


def _prompt_relative(rows: pl.DataFrame, score: str, rule: OutlierRule) -> list[float | None]:
    """Each row's score minus the median of the other models' scores on its prompt (same
    judge), or None where fewer than ``rule.prompt_min_models`` other models have one."""
    by_prompt: dict[tuple[object, object], list[tuple[object, float]]] = {}
    keyed = rows.select("prompt_id", "judge", "model", score).iter_rows()
    for pid, judge, model, value in keyed:
        by_prompt.setdefault((pid, judge), []).append((model, float(value)))
    out: list[float | None] = []
    for pid, judge, model, value in rows.select("prompt_id", "judge", "model",
                                                score).iter_rows():
        others = [(m, v) for m, v in by_prompt[(pid, judge)] if m != model]
        if len({m for m, _ in others}) < rule.prompt_min_models:
            out.append(None)
        else:
            out.append(float(value) - float(statistics.median([v for _, v in others])))
    return out


def _median_without(ranked: Sequence[float] | np.ndarray, k: int) -> float:
    """The median of the ascending ``ranked`` without its element at position ``k``."""
    n = len(ranked) - 1

    def at(j: int) -> float:
        return float(ranked[j if j < k else j + 1])

    return at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2


def _outliers(table: pl.DataFrame, score: str, rule: OutlierRule) -> set[int]:
    """Row indices whose ``score`` is far above their (model, judge)'s other ok scores."""
    found: set[int] = set()
    ok = table.with_row_index("_row").filter((pl.col("status") == OK)
                                             & pl.col(score).is_not_null())
    if ok.is_empty():
        return found
    relative = _prompt_relative(ok, score, rule) if rule.prompt_relative else None
    ok = ok.with_columns(pl.Series("_relative", relative, dtype=pl.Float64)
                         if relative is not None else pl.lit(None, pl.Float64)
                         .alias("_relative"))
    for _, group in ok.group_by("model", "judge"):
        # relative scores only when every essay of the group has one: never mixed
        column = "_relative" if group["_relative"].null_count() == 0 else score
        values = group[column].to_numpy().astype(np.float64)
        rows = group["_row"].to_list()
        if len(values) - 1 < rule.min_others:
            continue
        # The median of all lies between the others' median and the value left out, so a
        # value above the others' median is at least the median of all: only those are tried.
        # The others' median comes from the sorted values (no copy per row), and the spread
        # is computed only for a gap of at least ``points``.
        order = np.argsort(values, kind="stable")
        ranked = values[order]
        position = np.empty_like(order)
        position[order] = np.arange(len(order))
        for i in np.flatnonzero(values >= np.median(values)):
            median = _median_without(ranked, int(position[i]))
            gap = float(values[i]) - median
            if gap < rule.points:
                continue
            others = np.delete(values, i)
            scale = max(1.4826 * float(np.median(np.abs(others - median))), rule.scale_floor)
            if scale == 0 or gap / scale > rule.z:
                found.add(int(rows[i]))
    return found


def add_flags(table: pl.DataFrame, essays: pl.DataFrame, score_max: int,
              score: str = "score_weighted",
              outlier: OutlierRule = OUTLIER_RULE) -> pl.DataFrame:
    """``table`` (judge-stage rows) with ``essay_flags`` and ``judgment_flags``; ``essays``
    holds the judged texts (prompt_id, model, sample_index, prompt_text, essay_text)."""
    texts: dict[tuple[str, str, int], list[str]] = {}
    for pid, model, idx, prompt, essay in essays.select(
            "prompt_id", "model", "sample_index", "prompt_text", "essay_text").iter_rows():
        texts[(pid, model, int(idx))] = essay_flags(str(prompt or ""), str(essay or ""))
    outliers = _outliers(table, score, outlier) if score in table.columns else set()
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


def flagged(table: pl.DataFrame, skip: Sequence[str] = ()) -> pl.Series:
    """Whether each row has any essay or judgment flag (judgment flags in ``skip`` aside:
    a shard leaves out ``WHOLE_RUN_FLAGS``, which only the whole run decides)."""
    if not skip:
        return (pl.Series([v != "[]" for v in table["essay_flags"]])
                | pl.Series([v != "[]" for v in table["judgment_flags"]]))
    left_out = set(skip)
    return pl.Series([e != "[]" or any(c not in left_out for c in json.loads(j or "[]"))
                      for e, j in table.select("essay_flags", "judgment_flags").iter_rows()],
                     dtype=pl.Boolean)


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
