"""Reading a judge's reply: exactly the rubric's sub-questions, each an int in range.

A reply that is not a valid judgment raises :class:`JudgmentError` naming the offending
question; the caller records it as ``parse_error`` with the raw reply, never a score.
"""


from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from essaybench.bench.judge.request import Scoring
from essaybench.bench.rubrics import AlignScore
from essaybench.llm.structured import StructuredError, reply_object


class JudgmentError(ValueError):
    """A reply that is not a valid judgment; the message names the offending question."""


def question_ids(scoring: Scoring, genre: str) -> list[str]:
    if isinstance(scoring, AlignScore):
        return scoring.score_ids()
    return scoring.question_ids(genre)


def as_object(parsed_or_text: Any) -> Mapping[str, Any]:
    try:
        return reply_object(parsed_or_text)
    except StructuredError as exc:
        raise JudgmentError(str(exc)) from exc


def parse_scores(parsed_or_text: Any, ids: Sequence[str],
                 score_range: tuple[int, int]) -> dict[str, int]:
    """``scores`` of a reply: exactly ``ids``, each a true int within ``score_range``."""
    return scores_of(as_object(parsed_or_text), tuple(ids), frozenset(ids), score_range)


def scores_of(reply: Mapping[str, Any], ids: tuple[str, ...], known: frozenset[str],
               score_range: tuple[int, int]) -> dict[str, int]:
    """:func:`parse_scores` on a reply already read as an object, with ``known`` =
    ``frozenset(ids)`` computed once per genre rather than once per judgment."""
    scores = reply.get("scores")
    if not isinstance(scores, Mapping):
        raise JudgmentError("reply has no 'scores' object")
    lo, hi = score_range
    if not known.issuperset(scores):
        extra = [str(k) for k in scores if k not in known]
        raise JudgmentError(f"unknown question id(s) in scores: {', '.join(extra)}")
    result: dict[str, int] = {}
    for qid in ids:
        if qid not in scores:
            raise JudgmentError(f"question {qid}: missing score")
        value = scores[qid]
        # JSON Schema's "integer" accepts 7.0; a judge that writes 7.0 is not followed exactly,
        # and True is a parsing accident, not a 1. (A plain int, the common case, skips the
        # two isinstance checks.)
        if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
            raise JudgmentError(f"question {qid}: score must be an integer, got {value!r}")
        if not lo <= value <= hi:
            raise JudgmentError(f"question {qid}: score {value} outside {lo}..{hi}")
        result[qid] = value
    return result


def parse_judgment(parsed_or_text: Any, rubric: Scoring, genre: str) -> dict[str, int]:
    """The judge's sub-scores for ``genre``; raises :class:`JudgmentError` naming the question."""
    return parse_scores(parsed_or_text, question_ids(rubric, genre), rubric.score_range)


def analysis_of(reply: Mapping[str, Any]) -> str | None:
    value = reply.get("analysis")
    return value if isinstance(value, str) else None
