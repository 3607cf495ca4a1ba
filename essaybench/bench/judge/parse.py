"""Reading a judge's reply: exactly the rubric's sub-questions, each an int in range.

A reply is read in steps, each of which may reject it with a :class:`JudgmentError`
naming what is wrong; the caller records that as ``parse_error`` with the raw reply,
never a score:

1. :func:`as_object` — the raw reply text is exactly one JSON object (a code fence around
   it allowed): no second object, no text before or after it, no key twice
   (``llm.structured.parse_json_reply``). The text decides, not an object the gateway
   parsed: a ledger row written by an older, laxer reader keeps the object it picked.
2. :func:`scores_object` — the object has a ``scores`` object.
3. :func:`scores_of` — the scores are exactly the rubric's question ids for the genre, each
   a true int within the score range.

1b. :func:`check_nonce` — when the call asked for a nonce (judge_prompt.v2), the object
   echoes exactly that value: a verdict copied from the essay cannot know it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from essaybench.bench.judge.request import Scoring
from essaybench.bench.rubrics import AlignScoreRubric
from essaybench.llm.structured import StructuredError, reply_object


class JudgmentError(ValueError):
    """A reply that is not a valid judgment; the message names the offending question.
    ``analysis``: the reply's analysis when it was one JSON object (kept for the record)."""

    def __init__(self, message: str, analysis: str | None = None) -> None:
        super().__init__(message)
        self.analysis = analysis


@dataclass(frozen=True)
class Judgment:
    """A reply that passed every step: its sub-scores, and its analysis when it had one."""

    scores: dict[str, int]
    analysis: str | None


def question_ids(scoring: Scoring, genre: str) -> list[str]:
    if isinstance(scoring, AlignScoreRubric):
        return scoring.score_ids()
    return scoring.question_ids(genre)


def as_object(parsed_or_text: Any) -> Mapping[str, Any]:
    """Step 1: the reply (its raw text, or an already parsed value when there is no
    text) as exactly one JSON object."""
    try:
        return reply_object(parsed_or_text)
    except StructuredError as exc:
        raise JudgmentError(str(exc)) from exc


def check_nonce(reply: Mapping[str, Any], nonce: str | None) -> None:
    """Step 1b: the call's nonce, echoed (nothing to check when the call asked none)."""
    if nonce is not None and reply.get("nonce") != nonce:
        got = reply.get("nonce")
        raise JudgmentError("reply does not echo the call's nonce ("
                            + ("none given" if got is None else "a different value")
                            + "): not this call's judgment, e.g. a verdict copied from the "
                            "essay")


def analysis_of(reply: Mapping[str, Any]) -> str | None:
    value = reply.get("analysis")
    return value if isinstance(value, str) else None


def scores_object(reply: Mapping[str, Any]) -> Mapping[str, Any]:
    """Step 2: the reply's ``scores`` object."""
    scores = reply.get("scores")
    if not isinstance(scores, Mapping):
        raise JudgmentError("reply has no 'scores' object")
    return scores


def scores_of(reply: Mapping[str, Any], ids: tuple[str, ...], known: frozenset[str],
              score_range: tuple[int, int]) -> dict[str, int]:
    """Steps 2 and 3 on a reply already read as an object, with ``known`` =
    ``frozenset(ids)`` computed once per genre rather than once per judgment."""
    scores = scores_object(reply)
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


def read_judgment(parsed_or_text: Any, ids: tuple[str, ...], known: frozenset[str],
                  score_range: tuple[int, int], nonce: str | None = None) -> Judgment:
    """Every step in order; the first that fails raises :class:`JudgmentError` (with the
    reply's analysis when it got past step 1). ``nonce``: what the reply must echo."""
    reply = as_object(parsed_or_text)
    analysis = analysis_of(reply)
    try:
        check_nonce(reply, nonce)
        scores = scores_of(reply, ids, known, score_range)
    except JudgmentError as exc:
        raise JudgmentError(str(exc), analysis) from exc
    return Judgment(scores, analysis)


def parse_scores(parsed_or_text: Any, ids: Sequence[str],
                 score_range: tuple[int, int]) -> dict[str, int]:
    """``scores`` of a reply: exactly ``ids``, each a true int within ``score_range``."""
    return read_judgment(parsed_or_text, tuple(ids), frozenset(ids), score_range).scores


def parse_judgment(parsed_or_text: Any, rubric: Scoring, genre: str) -> dict[str, int]:
    """The judge's sub-scores for ``genre``; raises :class:`JudgmentError` naming the question."""
    return parse_scores(parsed_or_text, question_ids(rubric, genre), rubric.score_range)
