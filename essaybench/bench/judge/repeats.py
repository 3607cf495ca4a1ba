"""Repeated judging (``judge.repeats: k``, ``judge.repeat_when``): which essays a judge
scores k times, the extra calls, and how k calls become one judgment.

Which essays (``repeat_when``), for each judge:

- ``all``: every ok essay.
- ``flagged``: the ok essays the injection detector flags (``injection.essay_flags``).
- ``borderline``: decided after every essay was judged once. For each judge and each
  Table 5 cell (genre × prompt set), every model with at least one ok judgment in the cell
  has a cell mean of the main score (``score_weighted``; ``align_total`` in
  ``align_score`` mode; both 0–100) over those first judgments. The models are ordered by
  it; two models next to each other in that order are adjacent. A model is borderline in
  the cell when an adjacent model's mean is within ``borderline_margin`` points of its own
  (``|Δ| ≤ margin``). Every judged essay of a borderline model in that cell is judged
  k − 1 more times by that judge. A model alone in its cell is never borderline.

``all`` and ``flagged`` are known from the essay alone, so their calls are built with the
first call (and sent while generating, by the prefetch); ``borderline`` calls are built
by the judge stage after its first pass.

The calls: repeat 0 is the ordinary judge call, unchanged (``repeats: 1`` sends and keys
exactly what it always did). Repeat r ≥ 1 is the same request with ``sample_index = r``
and a ``seed`` derived from the essay and r: each repeat has its own ledger key (a rerun
pays for none twice) and, where the endpoint honours seeds, is a different sample.

One judgment from the calls: per sub-question, the median over the calls that parsed; of
an even number of them, the lower middle value — scores stay integers on the rubric's
scale, and an injection that works in half of the calls does not raise the score. The
spread, over the same calls (null with fewer than two): ``score_spread`` = max − min of
the per-call main score; ``question_ranges`` = per sub-question max − min.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import polars as pl

from essaybench.bench.judge.injection import essay_flags
from essaybench.core.contracts import OK
from essaybench.core.hashing import canonical_json, sha256_hex
from essaybench.llm.types import ChatRequest

RepeatWhen = Literal["all", "flagged", "borderline"]
UPFRONT: frozenset[str] = frozenset({"all", "flagged"})  # decided from the essay alone
SEED_RANGE = 2**31 - 1  # fits every server's seed type (as generate's sample seeds)

# The main score of a judgment, per judge mode: what cells rank and spreads measure.
MAIN_SCORE = {"rubric": "score_weighted", "align_score": "align_total"}


def repeat_seed(tag: str, repeat: int) -> int:
    """The seed of repeat ``repeat`` of the judge call on essay ``tag``."""
    digest = sha256_hex(canonical_json({"essay": tag, "judge_repeat": repeat}))
    return int(digest[:15], 16) % SEED_RANGE


def repeat_requests(first: ChatRequest, repeats: int) -> list[ChatRequest]:
    """Repeats 1..repeats−1 of ``first`` (repeat 0, the ordinary call)."""
    return [first.model_copy(update={
        "sample_index": r, "params": {**first.params, "seed": repeat_seed(first.tag, r)}})
        for r in range(1, repeats)]


def repeated_upfront(when: RepeatWhen, repeats: int, prompt_text: str,
                     essay_text: str) -> bool:
    """Whether an ok essay's repeats are built with its first call (``all``, ``flagged``)."""
    if repeats < 2 or when not in UPFRONT:
        return False
    return when == "all" or bool(essay_flags(prompt_text, essay_text))


CellKey = tuple[str, str, str, str]  # judge, model, genre, prompt_set


def borderline_cells(first: pl.DataFrame, score: str, margin: float) -> set[CellKey]:
    """(judge, model, genre, prompt_set) of every borderline model (module docstring), from
    a judgments table of first calls."""
    means = (first.filter((pl.col("status") == OK) & pl.col(score).is_not_null())
             .group_by("judge", "genre", "prompt_set", "model")
             .agg(pl.col(score).mean().alias("mean")))
    found: set[CellKey] = set()
    for (judge, genre, prompt_set), cell in means.group_by("judge", "genre", "prompt_set"):
        cell = cell.sort("mean", "model")  # the models in the order of their cell means
        models = cell["model"].to_list()
        values = cell["mean"].to_list()
        for i in range(len(models) - 1):
            if values[i + 1] - values[i] <= margin + 1e-9:  # within: the margin included
                found.update((str(judge), str(m), str(genre), str(prompt_set))
                             for m in (models[i], models[i + 1]))
    return found


def median_scores(runs: Sequence[Mapping[str, int]]) -> dict[str, int]:
    """Per sub-question, the (lower) median over ``runs`` (each with the same ids)."""
    if len(runs) == 1:
        return dict(runs[0])
    return {qid: statistics.median_low(run[qid] for run in runs) for qid in runs[0]}


def question_ranges(runs: Sequence[Mapping[str, int]]) -> dict[str, int] | None:
    """Per sub-question max − min over ``runs``; None with fewer than two."""
    if len(runs) < 2:
        return None
    return {qid: max(run[qid] for run in runs) - min(run[qid] for run in runs)
            for qid in runs[0]}


def spread(totals: Sequence[float]) -> float | None:
    """max − min of the per-call main scores; None with fewer than two."""
    return max(totals) - min(totals) if len(totals) >= 2 else None


def repeat_record(repeat: int, status: str, key: str, total: float | None,
                  error: str | None) -> dict[str, Any]:
    """One call of a repeated judgment, as the ``repeat_calls`` column lists it."""
    return {"repeat": repeat, "status": status, "call_key": key, "score": total,
            "error": None if error is None else error[:200]}
