"""How flagged judgments count in the leaderboard (``flagged_essays`` in the benchmark
config), and the second opinions beside the first judge's scores.

A judgment is flagged when its essay tries to steer the judge or its scores look steered
(``bench/judge/flags.py``); ``judge.second_judge`` judges those once more
(``bench/judge/second.py``). The judge snapshot keeps both opinions; this module decides
which one the leaderboard ranks (the main score: ``score_weighted``, ``align_total`` in
``align_score`` mode) and leaves the stored judgments as they are:

- ``second_opinion`` (the default): a flagged judgment with an ok second opinion is
  ranked on the second judge's score (a flagged essay whose first judgment failed too:
  item 14's "an essay removes itself from the mean" is answered by the second judge);
  without one (no second judge configured, or its call failed — which run health fails,
  like any judge's) the first judge's score stays, marked ``first_judge``.
- ``exclude``: a flagged judgment is left out of the mean; it stays in the cell's rows,
  so the coverage beside the mean shows it.
- ``first_judge``: the first judge's score, flagged or not (the marks stay).

Why the default: ``first_judge`` lets a judge that obeyed an injection rank its writer
first; ``exclude`` lets an essay take itself out of its model's mean by addressing the
judge, and drops the detector's false flags (clean essays) too; ``second_opinion`` keeps
every essay in the mean, scored by a judge the attack did not steer. Its cost: the second
judge's scale is not the first's, so the report shows how many of each model's essays
are ranked on it and the mean second − first difference beside the leaderboard.

Only the main score follows the rule: w/o WT and the trait means stay the first judge's
(the second judge's opinion is one score). Each row gets ``ranked_on``: null (not
flagged), ``second_opinion``, ``first_judge`` or ``excluded``.
"""

from __future__ import annotations

from typing import Literal

import polars as pl

from essaybench.core.contracts import OK
from essaybench.store.store import StageRun

FlaggedRule = Literal["second_opinion", "exclude", "first_judge"]
DEFAULT_FLAGGED_RULE: FlaggedRule = "second_opinion"
RECORDED_BEFORE: FlaggedRule = "first_judge"  # runs from before the rule ranked this way
RANKED_ON = "ranked_on"
SECOND_OPINION_NOTE = {
    "second_opinion": "flagged essays are ranked on the second judge's score where it has "
                      "one, else on the first judge's",
    "exclude": "flagged essays are left out of the mean (they lower the coverage)",
    "first_judge": "flagged essays keep the first judge's score",
}


def main_score(judgments: pl.DataFrame) -> str:
    """The column the leaderboard ranks: ``score_weighted``, or ``align_total`` when the
    judgments are Align-Score ones."""
    weighted = "score_weighted" in judgments.columns and (
        judgments["score_weighted"].null_count() < judgments.height or judgments.height == 0)
    return "align_total" if not weighted and "align_total" in judgments.columns \
        else "score_weighted"


def _flagged(judgments: pl.DataFrame) -> pl.Expr:
    """Any essay or judgment flag (as ``flags.flagged``; no flag columns: none)."""
    found = [pl.col(c).fill_null("[]") != "[]" for c in ("essay_flags", "judgment_flags")
             if c in judgments.columns]
    return pl.any_horizontal(found) if found else pl.lit(False)


def ranked_judgments(judgments: pl.DataFrame, rule: FlaggedRule,
                     score: str | None = None) -> pl.DataFrame:
    """``judgments`` as the leaderboard ranks them under ``rule`` (module docstring), with
    ``ranked_on`` saying how each flagged row's main score was chosen."""
    score = score or main_score(judgments)
    flagged = _flagged(judgments)
    has_second = "second_status" in judgments.columns and "second_score" in judgments.columns
    second_ok = ((pl.col("second_status") == OK) & pl.col("second_score").is_not_null()
                 ).fill_null(False) if has_second else pl.lit(False)
    if rule == "second_opinion":
        use_second = flagged & second_ok
        ranked_on = pl.when(use_second).then(pl.lit("second_opinion")) \
            .when(flagged).then(pl.lit("first_judge"))
        out = judgments.with_columns(
            pl.when(use_second).then(pl.col("second_score") if has_second else None)
            .otherwise(pl.col(score))
            .cast(pl.Float64).alias(score),
            pl.when(use_second).then(pl.lit(OK)).otherwise(pl.col("status")).alias("status"),
            ranked_on.alias(RANKED_ON))
        return out
    if rule == "exclude":
        return judgments.with_columns(
            pl.when(flagged).then(None).otherwise(pl.col(score)).cast(pl.Float64).alias(score),
            pl.when(flagged).then(pl.lit("excluded")).alias(RANKED_ON))
    return judgments.with_columns(pl.when(flagged).then(pl.lit("first_judge")).alias(RANKED_ON))


def ranked_score(judgments: pl.DataFrame, rule: FlaggedRule, score: str) -> pl.DataFrame:
    """``judgments`` ranked under ``rule`` when ``score`` is their main score (the only
    score the rule applies to); any other score as stored. What week-over-week
    comparisons read, so they compare what the leaderboards showed."""
    if score not in judgments.columns or score != main_score(judgments):
        return judgments
    return ranked_judgments(judgments, rule, score)


SECOND_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    "judge": pl.Utf8, "model": pl.Utf8, "rule": pl.Utf8, "judged": pl.Int64,
    "flagged": pl.Int64, "second_asked": pl.Int64, "second_ok": pl.Int64,
    "first_mean": pl.Float64, "second_mean": pl.Float64,
    "mean_second_minus_first": pl.Float64, "ranked_on_second": pl.Int64,
    "kept_first": pl.Int64, "excluded": pl.Int64, "second_judge": pl.Utf8,
}


def second_opinion_table(judgments: pl.DataFrame, rule: FlaggedRule,
                         score: str | None = None) -> pl.DataFrame:
    """Per (judge, model) with any flagged judgment: judgments, flagged ones, second
    opinions asked and obtained, the first and second judge's means over the flagged
    rows both scored and their mean difference, and how the leaderboard ranked them."""
    score = score or main_score(judgments)
    ranked = ranked_judgments(judgments, rule, score).with_columns(
        _flagged(judgments).alias("_flagged"),
        judgments[score].cast(pl.Float64).alias("_first"),
        judgments["status"].alias("_first_status"))
    if "second_status" not in ranked.columns:
        ranked = ranked.with_columns(pl.lit(None, pl.Utf8).alias("second_status"),
                                     pl.lit(None, pl.Float64).alias("second_score"),
                                     pl.lit(None, pl.Utf8).alias("second_judge"))
    both = (pl.col("_first_status") == OK) & pl.col("_first").is_not_null() \
        & (pl.col("second_status") == OK).fill_null(False)
    first_mean = pl.col("_first").filter(pl.col("_flagged") & both).mean()
    second_mean = pl.col("second_score").filter(pl.col("_flagged") & both).mean()
    table = (ranked.group_by("judge", "model")
             .agg(pl.lit(rule).alias("rule"), pl.len().alias("judged"),
                  pl.col("_flagged").sum().alias("flagged"),
                  pl.col("second_judge").is_not_null().sum().alias("second_asked"),
                  (pl.col("second_status") == OK).fill_null(False).sum().alias("second_ok"),
                  first_mean.alias("first_mean"), second_mean.alias("second_mean"),
                  (second_mean - first_mean).alias("mean_second_minus_first"),
                  (pl.col(RANKED_ON) == "second_opinion").sum().alias("ranked_on_second"),
                  (pl.col(RANKED_ON) == "first_judge").sum().alias("kept_first"),
                  (pl.col(RANKED_ON) == "excluded").sum().alias("excluded"),
                  pl.col("second_judge").drop_nulls().first().alias("second_judge"))
             .filter(pl.col("flagged") > 0))
    return table.select(list(SECOND_SCHEMA)).cast(SECOND_SCHEMA).sort(  # type: ignore[arg-type]
        "judge", "model")


def rule_of_meta(meta: dict[str, object] | None) -> FlaggedRule | None:
    """The rule a stage run recorded in its catalog meta (None: recorded before rules)."""
    found = (meta or {}).get("flagged_essays")
    return found if found in SECOND_OPINION_NOTE else None  # type: ignore[return-value]


def flagged_rule_of(stage_runs: list[StageRun]) -> FlaggedRule:
    """The ``flagged_essays`` rule the run's leaderboard tables were made with: its newest
    ok stats stage's (the intervals), else its aggregate's (Table 5); a run from before
    the rule ranked on the first judge."""
    for stage in ("stats", "aggregate"):
        for row in stage_runs:  # newest first
            if row.stage == stage and row.status == OK:
                return rule_of_meta(row.meta) or RECORDED_BEFORE
    return RECORDED_BEFORE


def mark(row: dict[str, object] | None) -> str:
    """What the leaderboard says about one model's flagged judgments ("" when none)."""
    if not row or not row.get("flagged"):
        return ""
    parts = [f"{row['flagged']} flagged"]
    if row.get("ranked_on_second"):
        parts.append(f"{row['ranked_on_second']} ranked on the second opinion "
                     f"({row.get('second_judge')})")
    if row.get("kept_first"):
        parts.append(f"{row['kept_first']} on the first judge's score")
    if row.get("excluded"):
        parts.append(f"{row['excluded']} excluded")
    return ", ".join(parts)


def _num(value: object) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) else "—"


def second_opinion_lines(table: pl.DataFrame) -> list[str]:
    """The ``second_opinions`` table as lines for a terminal (empty: nothing flagged)."""
    if not table.height:
        return []
    rule = str(table["rule"][0])
    lines = [f"Flagged judgments: second opinions beside the first judge's (leaderboard "
             f"rule flagged_essays {rule}: {SECOND_OPINION_NOTE.get(rule, rule)}):"]
    for r in table.iter_rows(named=True):
        second = (f"second judge {r['second_judge']}: {r['second_ok']}/{r['second_asked']} "
                  f"obtained, first {_num(r['first_mean'])} → second "
                  f"{_num(r['second_mean'])} (Δ {_num(r['mean_second_minus_first'])})"
                  if r["second_judge"] else "no second judge")
        lines.append(f"  {r['model']} × {r['judge']}: {r['flagged']} of {r['judged']} "
                     f"flagged; {second}; {mark(r)}")
    return lines
