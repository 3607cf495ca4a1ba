"""A second opinion on flagged judgments (``judge.second_judge``).

After the judge stage has flagged essays that try to steer the judge and judgments that
look steered (``flags.py``), each flagged (essay, judge) row can be judged once more by a
different judge model. The second opinion is recorded beside the first — ``second_judge``,
``second_status``, ``second_score`` (the mode's main score), ``second_error`` — and never
replaces it: a reader sees both, and the per-model summary says how far they differ.
"""

from __future__ import annotations

import polars as pl

from essaybench.bench.judge.flags import flagged
from essaybench.bench.judge.judgments import run_judge
from essaybench.bench.judge.repeats import MAIN_SCORE
from essaybench.bench.judge.request import ESSAY_KEY_COLUMNS, JudgeParams, Runner
from essaybench.core.contracts import OK

SECOND_COLUMNS: dict[str, type[pl.DataType]] = {
    "second_judge": pl.Utf8, "second_status": pl.Utf8, "second_score": pl.Float64,
    "second_error": pl.Utf8}


def second_opinions(table: pl.DataFrame, essays: pl.DataFrame, params: JudgeParams,
                    session: Runner) -> pl.DataFrame:
    """``table`` (flagged judge rows) with the second judge's opinion on the flagged ones
    (null columns elsewhere, and everywhere when no second judge is configured)."""
    empty = table.with_columns(*(pl.lit(None, dtype=t).alias(c)
                                 for c, t in SECOND_COLUMNS.items()))
    second = params.second_judge
    if second is None:
        return empty
    marked = table.with_columns(pl.lit(flagged(table)).alias("_flagged"))
    wanted = marked.filter(pl.col("_flagged") & (pl.col("judge") != second)).select(
        ESSAY_KEY_COLUMNS).unique()
    if wanted.is_empty():
        return empty
    chosen = essays.join(wanted, on=list(ESSAY_KEY_COLUMNS), how="semi")
    one = params.model_copy(update={"judges": [second], "repeats": 1, "second_judge": None})
    judged = run_judge(chosen, one, session).table
    score = MAIN_SCORE[params.mode]
    opinions = judged.select(
        *ESSAY_KEY_COLUMNS, pl.lit(second).alias("second_judge"),
        pl.col("status").alias("second_status"),
        pl.when(pl.col("status") == OK).then(pl.col(score)).otherwise(None)
        .cast(pl.Float64).alias("second_score"),
        pl.col("error").alias("second_error"))
    merged = marked.join(opinions, on=list(ESSAY_KEY_COLUMNS), how="left",
                         maintain_order="left")
    return merged.with_columns(  # only the flagged rows carry the second opinion
        *(pl.when(pl.col("_flagged")).then(pl.col(c)).otherwise(None).alias(c)
          for c in SECOND_COLUMNS)).drop("_flagged")


def second_summary(table: pl.DataFrame, score: str) -> list[dict[str, object]]:
    """Per model × judge: second opinions asked, obtained, and the mean of second − first
    over the rows both scored."""
    if "second_judge" not in table.columns:
        return []
    asked = table.filter(pl.col("second_judge").is_not_null())
    out: list[dict[str, object]] = []
    for (model, judge), group in sorted(asked.group_by("model", "judge"),
                                        key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        both = group.filter((pl.col("status") == OK) & (pl.col("second_status") == OK))
        delta = (both["second_score"] - both[score]).mean() if both.height else None
        out.append({"model": model, "judge": judge, "asked": group.height,
                    "obtained": int((group["second_status"] == OK).sum()),
                    "mean_second_minus_first": delta})
    return out
