"""Instruction following beyond the paper: does an essay meet its prompt's length requirement?

The paper scores quality only and names instruction following as a limitation;
this module checks the one requirement that can be verified without a judge,
the length of the essay's body (see ``essaybench.constraints.length``): a title's,
a summary's or another piece's length in the same prompt is not the essay's.

Which count decides. Compliance uses the grid count (``count_grid_chars``):
every non-space character, punctuation included. Reason: 字数 in a Chinese
exam is read off the 方格稿纸, where each character and each punctuation mark
fills one cell, so "不少于800字" means 800 cells; Chinese prose is ~10–15%
punctuation, and counting ideographs only would fail essays that a marker
accepts. Whitespace and line breaks never count (a paragraph indent is layout,
not text). The ideograph-only count (``count_chinese_chars``) is reported
beside it so a reader can re-judge with the stricter rule.

Deviation. ``deviation`` is signed and relative to the violated bound:
(n − min)/min when under (negative), (n − max)/max when over (positive), 0.0
when compliant, None when there is no requirement. A target ("约600字") is
judged against its ±APPROX_TOLERANCE range, so its bounds are those of the range.

Null essays (generation failed) get a null verdict and are left out of every
rate; an empty string is an essay of length 0 (the model answered nothing).

Off-language essays. An essay not written in Chinese (the generate stage's
``off_language``, else :func:`is_off_language`) gets the verdict ``off_language``:
its length in characters is no Chinese essay's length (an English essay of 800
letters is not "compliant" with 不少于800字), so it is counted apart
(``n_off_language``) and left out of the compliance rates and the mean lengths.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import polars as pl

from essaybench.constraints import (
    LengthRequirement,
    count_chinese_chars,
    count_grid_chars,
    length_requirement,
)

LengthVerdict = Literal["compliant", "under", "over", "no_requirement"]
OFF_LANGUAGE = "off_language"  # the table's verdict of an essay not written in Chinese
LENGTH_VERDICTS = ("compliant", "over", "under")  # the verdicts a rate counts
_LATIN = re.compile(r"[A-Za-z]")


def is_off_language(text: str) -> bool:
    """Not written in Chinese: more Latin letters than ideographs (an empty essay is
    not off-language; it is a violation)."""
    han = count_chinese_chars(text)
    latin = len(_LATIN.findall(text))
    return latin > han


@dataclass(frozen=True)
class LengthCheck:
    requirement: LengthRequirement | None
    chinese_chars: int  # ideographs only, reported for reference
    grid_chars: int  # the count the verdict uses (see module doc)
    verdict: LengthVerdict
    deviation: float | None  # signed, relative to the violated bound; None without requirement


def _judge(n: int, lo: int | None, hi: int | None) -> tuple[LengthVerdict, float]:
    under = (n - lo) / lo if lo is not None and lo > 0 and n < lo else None
    over = (n - hi) / hi if hi is not None and hi > 0 and n > hi else None
    if under is not None and (over is None or -under <= over):
        return "under", under  # (lo > hi cannot happen: a requirement never has min > max)
    if over is not None:
        return "over", over
    return "compliant", 0.0


# A prompt's requirement is extracted once, not once per essay (15 models x 728 prompts:
# ~3 s of the aggregate stage); LengthRequirement is frozen, so sharing it is safe.
_requirement = lru_cache(maxsize=4096)(length_requirement)


def check_length(prompt_text: str, essay_text: str) -> LengthCheck:
    req = _requirement(prompt_text)
    grid = count_grid_chars(essay_text)
    chinese = count_chinese_chars(essay_text)
    if req is None:
        return LengthCheck(None, chinese, grid, "no_requirement", None)
    verdict, deviation = _judge(grid, *req.bounds())
    return LengthCheck(req, chinese, grid, verdict, deviation)


_TABLE_SCHEMA: dict[str, type[pl.DataType]] = {
    "req_min_chars": pl.Int64, "req_max_chars": pl.Int64, "req_approx_chars": pl.Int64,
    "essay_chars": pl.Int64, "essay_grid_chars": pl.Int64,
    "length_verdict": pl.String, "length_deviation": pl.Float64,
}


def compliance_table(essays: pl.DataFrame, prompt_column: str = "text") -> pl.DataFrame:
    """``essays`` (columns ``prompt_column`` = the prompt, ``essay_text``) with the length
    check added; the generate stage's essays carry the prompt as ``prompt_text``.

    ``essay_chars`` is the ideograph count, ``essay_grid_chars`` the grid count
    the verdict uses. A null essay keeps its requirement columns and gets null
    counts, verdict and deviation; an off-language one (module doc) gets its counts, the
    verdict ``off_language`` and no deviation.
    """
    cols: dict[str, list[object]] = {name: [] for name in _TABLE_SCHEMA}
    texts = essays["essay_text"].to_list()
    off = ([bool(v) for v in essays["off_language"].fill_null(False).to_list()]
           if "off_language" in essays.columns  # measured by the generate stage
           else [t is not None and is_off_language(t) for t in texts])
    for prompt, essay, foreign in zip(essays[prompt_column].to_list(), texts, off,
                                      strict=True):
        req = _requirement(prompt) if prompt is not None else None
        cols["req_min_chars"].append(req.min_chars if req else None)
        cols["req_max_chars"].append(req.max_chars if req else None)
        cols["req_approx_chars"].append(req.approx_chars if req else None)
        check = check_length(prompt or "", essay) if essay is not None else None
        cols["essay_chars"].append(check.chinese_chars if check else None)
        cols["essay_grid_chars"].append(check.grid_chars if check else None)
        foreign = foreign and check is not None
        cols["length_verdict"].append(OFF_LANGUAGE if foreign else
                                      check.verdict if check else None)
        cols["length_deviation"].append(None if foreign or check is None else check.deviation)
    return essays.with_columns(
        pl.Series(name, values, dtype=_TABLE_SCHEMA[name]) for name, values in cols.items())


def compliance_rates(table: pl.DataFrame, by: Sequence[str] = ("model",)) -> pl.DataFrame:
    """Per group of a ``compliance_table``: how often essays meet their length requirement.

    Columns: ``n_essays`` (rows), ``n_with_requirement`` (rows whose prompt has
    one, null essays included), ``n_off_language`` (essays not written in Chinese,
    requirement or not: counted apart), ``n_checked`` (with a requirement and a
    non-null essay in Chinese: the denominator of the three rates),
    ``compliance_rate``, ``over_rate``, ``under_rate`` (null when ``n_checked`` is
    0), and ``mean_essay_grid_chars`` and ``mean_essay_chars`` over the group's
    non-null essays in Chinese (requirement or not).
    """
    has_req = (pl.col("req_min_chars").is_not_null() | pl.col("req_max_chars").is_not_null()
               | pl.col("req_approx_chars").is_not_null())
    foreign = pl.col("length_verdict") == OFF_LANGUAGE
    checked = has_req & pl.col("length_verdict").is_in(LENGTH_VERDICTS)
    in_chinese = pl.col("length_verdict").is_not_null() & ~foreign

    def share(verdict: str) -> pl.Expr:
        hits = (checked & (pl.col("length_verdict") == verdict)).sum()
        n = checked.sum()
        return pl.when(n > 0).then(hits / n).otherwise(None)

    return (table.group_by(list(by), maintain_order=True)
            .agg(pl.len().alias("n_essays"),
                 has_req.sum().alias("n_with_requirement"),
                 foreign.fill_null(False).sum().alias("n_off_language"),
                 checked.sum().alias("n_checked"),
                 share("compliant").alias("compliance_rate"),
                 share("over").alias("over_rate"),
                 share("under").alias("under_rate"),
                 pl.col("essay_grid_chars").filter(in_chinese).mean()
                 .alias("mean_essay_grid_chars"),
                 pl.col("essay_chars").filter(in_chinese).mean().alias("mean_essay_chars"))
            .sort(list(by)))
