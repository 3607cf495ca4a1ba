"""A second opinion on flagged judgments (``judge.second_judge``).

After the judge stage has flagged essays that try to steer the judge and judgments that
look steered (``flags.py``), each flagged (essay, judge) row can be judged once more by a
different judge model. The second opinion is recorded beside the first — ``second_judge``,
``second_status``, ``second_score`` (the mode's main score), ``second_error`` — and never
replaces it: a reader sees both, and the per-model summary says how far they differ.

A flagged essay whose first judgment *failed* (its text made the reply unusable: a "check
code" to copy, a broken verdict) must not leave its model's mean unnoticed: it is judged
again — by the second judge when one is configured (as every flagged row is), else by its
own judge on a stripped copy (``injection.stripped_copy``: the flagged lines removed),
recorded as ``second_judge`` = ``"<judge> (stripped copy)"``. Either way the outcome is
in the second-opinion columns, and :func:`flagged_failures` counts them per model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

import polars as pl

from essaybench.bench.judge.flags import flagged
from essaybench.bench.judge.injection import stripped_copy
from essaybench.bench.judge.judgments import run_judge
from essaybench.bench.judge.repeats import MAIN_SCORE
from essaybench.bench.judge.request import ESSAY_KEY_COLUMNS, JudgeParams, Runner
from essaybench.core.contracts import OK

STRIPPED = " (stripped copy)"  # suffix of second_judge for a re-judged stripped copy
SECOND_COLUMNS: dict[str, type[pl.DataType]] = {
    "second_judge": pl.Utf8, "second_status": pl.Utf8, "second_score": pl.Float64,
    "second_error": pl.Utf8}


def _opinions(judged: pl.DataFrame, name: pl.Expr, score: str) -> pl.DataFrame:
    return judged.select(
        *ESSAY_KEY_COLUMNS, name.alias("second_judge"),
        pl.col("status").alias("second_status"),
        pl.when(pl.col("status") == OK).then(pl.col(score)).otherwise(None)
        .cast(pl.Float64).alias("second_score"),
        pl.col("error").alias("second_error"))


def _failed_flagged(table: pl.DataFrame) -> pl.Series:
    """Rows whose essay is flagged and whose (first) judgment failed."""
    return pl.Series([e not in (None, "[]") and s != OK
                      for e, s in table.select("essay_flags", "status").iter_rows()],
                     dtype=pl.Boolean)


def no_second_opinions(table: pl.DataFrame) -> pl.DataFrame:
    """``table`` with the second-opinion columns, all null."""
    return table.with_columns(*(pl.lit(None, dtype=t).alias(c)
                                for c, t in SECOND_COLUMNS.items()))


def second_opinions(table: pl.DataFrame, essays: pl.DataFrame, params: JudgeParams,
                    session: Runner, skip: Sequence[str] = ()) -> pl.DataFrame:
    """``table`` (flagged judge rows) with the second opinion on the flagged ones (null
    columns elsewhere): the second judge's; without one, a flagged essay whose judgment
    failed is re-judged by its own judge on a stripped copy (module docstring).
    ``skip``: judgment flags that ask for no second opinion here (a shard: the whole-run
    ones, left to ``complete_second_opinions``)."""
    score = MAIN_SCORE[params.mode]
    second = params.second_judge
    marked = table.with_columns(pl.lit(flagged(table, skip)).alias("_flagged"))
    keys = list(ESSAY_KEY_COLUMNS)
    opinions: list[pl.DataFrame] = []
    if second is not None:
        wanted = marked.filter(pl.col("_flagged") & (pl.col("judge") != second)).select(
            ESSAY_KEY_COLUMNS).unique()
        chosen = essays.join(wanted, on=keys, how="semi")
        one = params.model_copy(update={"judges": [second], "repeats": 1,
                                        "second_judge": None})
        if chosen.height:
            opinions.append(_opinions(run_judge(chosen, one, session).table, pl.lit(second),
                                      score))
    else:  # a stripped copy answers for its own judge's row only
        keys.append("judge")
        marked = marked.with_columns(_flagged=_failed_flagged(marked))
        failed = marked.filter(pl.col("_flagged"))
        opinions = [_stripped(failed, essays, params, session, judge, score)
                    for judge in sorted(set(failed["judge"]))]
    opinions = [o for o in opinions if o.height]
    if not opinions:
        return no_second_opinions(table)
    merged = marked.join(pl.concat(opinions), on=keys, how="left", maintain_order="left")
    return merged.with_columns(  # only the flagged rows carry the second opinion
        *(pl.when(pl.col("_flagged")).then(pl.col(c)).otherwise(None).alias(c)
          for c in SECOND_COLUMNS)).drop("_flagged")


def complete_second_opinions(table: pl.DataFrame, essays: pl.DataFrame,
                             params: JudgeParams,
                             session_of: Callable[[], AbstractContextManager[Runner]]
                             ) -> pl.DataFrame:
    """A sharded run's assembled judge table (flags over the whole run), whose shards asked
    the second judge about the rows their own flags chose (``second_opinions`` with
    ``skip=WHOLE_RUN_FLAGS``), with what ``second_opinions`` gives the whole table: each
    flagged row carries its essay's second opinion, another row's where the essay has one,
    else asked now (the essays only the whole run flagged: ``session_of()`` is opened only
    for those); rows not flagged carry none."""
    second = params.second_judge
    assert second is not None
    keys = list(ESSAY_KEY_COLUMNS)
    marked = table.with_columns(pl.lit(flagged(table)).alias("_flagged"))
    known = table.filter(pl.col("second_judge").is_not_null()).select(
        *keys, *SECOND_COLUMNS).unique(keys, keep="first", maintain_order=True)
    wanted = marked.filter(pl.col("_flagged") & (pl.col("judge") != second)).select(
        ESSAY_KEY_COLUMNS).unique().join(known, on=keys, how="anti")
    if wanted.height:
        chosen = essays.join(wanted, on=keys, how="semi")
        one = params.model_copy(update={"judges": [second], "repeats": 1,
                                        "second_judge": None})
        with session_of() as session:
            asked = _opinions(run_judge(chosen, one, session).table, pl.lit(second),
                              MAIN_SCORE[params.mode])
        known = pl.concat([known, asked], how="vertical_relaxed")
    merged = marked.drop(list(SECOND_COLUMNS), strict=False).join(
        known, on=keys, how="left", maintain_order="left")
    return merged.with_columns(
        *(pl.when(pl.col("_flagged")).then(pl.col(c)).otherwise(None).alias(c)
          for c in SECOND_COLUMNS)).drop("_flagged")


def _stripped(failed: pl.DataFrame, essays: pl.DataFrame, params: JudgeParams,
              session: Runner, judge: str, score: str) -> pl.DataFrame:
    """``judge``'s failed flagged rows judged again, by ``judge``, on stripped copies."""
    wanted = failed.filter(pl.col("judge") == judge).select(ESSAY_KEY_COLUMNS).unique()
    chosen = essays.join(wanted, on=list(ESSAY_KEY_COLUMNS), how="semi")
    chosen = chosen.with_columns(pl.Series("essay_text", [
        stripped_copy(str(p or ""), str(e or ""))
        for p, e in chosen.select("prompt_text", "essay_text").iter_rows()], dtype=pl.Utf8))
    one = params.model_copy(update={"judges": [judge], "repeats": 1, "second_judge": None})
    judged = run_judge(chosen, one, session).table
    return _opinions(judged, pl.lit(judge + STRIPPED), score).with_columns(
        pl.lit(judge).alias("judge"))


def flagged_failures(table: pl.DataFrame) -> list[dict[str, object]]:
    """Per model × judge with any: flagged essays whose judgment failed, how many were
    judged again (second judge or stripped copy) and how many of those are ok — so an
    essay that broke its judgment is counted, never silently out of the mean."""
    if "essay_flags" not in table.columns:
        return []
    failed = table.filter(_failed_flagged(table))
    has_second = "second_status" in failed.columns
    out: list[dict[str, object]] = []
    for (model, judge), group in sorted(failed.group_by("model", "judge"),
                                        key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        asked = group.filter(pl.col("second_status").is_not_null()) if has_second \
            else group.clear()
        out.append({"model": model, "judge": judge, "failed": group.height,
                    "rejudged": asked.height,
                    "rejudged_ok": int((asked["second_status"] == OK).sum()) if has_second
                    else 0,
                    "by": sorted({str(j) for j in asked["second_judge"]}) if has_second
                    else []})
    return out


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
