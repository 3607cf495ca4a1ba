"""Reading and scoring a judge's replies: one call's result to the columns of its row.

A reply is read strictly (``parse.read_judgment``: the genre's keys, the rubric's range,
the call's nonce) and scored (``scoring.py``); anything else is a failure row with its
reason, never a score. The judge stage reads every result here
(:mod:`.judgments`); the prefetch reads the results of the judge calls it sent while the
run was still writing essays (:mod:`.prefetch`) and leaves them in
:data:`PREFETCHED_READS`, where the judge stage takes them instead of reading ~10k replies
again after the last call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from essaybench.bench.judge.memo import ReadMemo
from essaybench.bench.judge.parse import JudgmentError, question_ids, read_judgment
from essaybench.bench.judge.render import JudgeRenderer
from essaybench.bench.judge.repeats import MAIN_SCORE
from essaybench.bench.judge.request import Scoring
from essaybench.bench.rubrics import AlignScoreRubric, Rubric
from essaybench.bench.scoring import TraitScorer, TraitSpec, align_score
from essaybench.llm.structured import reply_of
from essaybench.llm.types import CallStatus, ChatResult

INVALID_JUDGMENT = "invalid_judgment"  # a reply came, but its scores could not be read


def trait_specs(rubric: Rubric, genre: str) -> list[TraitSpec]:
    return [TraitSpec(t.id, t.depth, tuple(q.id for q in t.questions))
            for t in rubric.genre(genre).traits]


# json.dumps(..., ensure_ascii=False) builds a new encoder per call; one shared encoder
# writes the same text.
JSON = json.JSONEncoder(ensure_ascii=False)


@dataclass(frozen=True)
class JudgmentRead:
    """One call of a judgment, read: its columns (status, error, analysis, scores), and
    its sub-scores and main score when it parsed and scored."""

    result: ChatResult
    columns: dict[str, Any]
    scores: dict[str, int] | None = None
    total: float | None = None


class JudgmentReader:
    """Reads and scores one rubric's judgments. What depends only on the genre (question
    ids, the trait scorer) is worked out once per genre, not once per judgment."""

    def __init__(self, rubric: Scoring, renderer: JudgeRenderer | None = None,
                 memo: ReadMemo[JudgmentRead] | None = None, scope: str = "") -> None:
        self.rubric = rubric
        self.renderer = renderer  # the calls' renderer: what nonce each reply must echo
        # Reads made earlier of the same results under the same settings (``scope``:
        # ``request.request_scope``), taken instead of read again.
        self.memo = memo
        self.scope = scope
        self.main = MAIN_SCORE["align_score" if isinstance(rubric, AlignScoreRubric) else "rubric"]
        self._ids: dict[str, tuple[tuple[str, ...], frozenset[str], tuple[str, ...] | None]] = {}
        self._scorers: dict[str, TraitScorer] = {}

    def _question_ids(self, genre: str
                      ) -> tuple[tuple[str, ...], frozenset[str], tuple[str, ...] | None]:
        """The keys a reply's scores must have, as a tuple and a set, and the question ids
        they stand for when they are not the ids themselves (short keys)."""
        if genre not in self._ids:
            ids = tuple(question_ids(self.rubric, genre))
            keys = self.renderer.reply_keys(genre) if self.renderer is not None else None
            self._ids[genre] = ((ids, frozenset(ids), None) if keys is None
                                else (tuple(keys), frozenset(keys), ids))
        return self._ids[genre]

    def _score_columns(self, genre: str, scores: dict[str, int]) -> dict[str, Any]:
        rubric = self.rubric
        if isinstance(rubric, AlignScoreRubric):
            dims = {d.id: scores[d.id] for d in rubric.dimensions}
            result = align_score(dims, scores[rubric.overall.id])
            return {"align_total": result.total, "dimension_mean": result.dimension_mean}
        # Built on first use, inside the caller's try: a scorer that refuses the rubric
        # makes a parse_error row, as a refused score does.
        if genre not in self._scorers:
            self._scorers[genre] = TraitScorer(trait_specs(rubric, genre),
                                               rubric.alpha_default)
        weighted, unweighted = self._scorers[genre].scores(scores)
        return {"alpha": rubric.alpha_default, "score_weighted": weighted.total,
                "score_unweighted": unweighted.total,
                "trait_scores": JSON.encode(dict(weighted.trait_scores))}

    def scored(self, genre: str, scores: dict[str, int],
               analysis: str | None) -> dict[str, Any]:
        """The ok columns of ``scores``; ValueError when scoring.py refuses them."""
        return {"status": CallStatus.OK.value, "analysis": analysis,
                "scores": JSON.encode(scores), **self._score_columns(genre, scores)}

    def read(self, genre: str, result: ChatResult, nonce: str | None = None) -> JudgmentRead:
        """One call's result: failed, a reply that is no judgment, or a scored one."""
        if self.memo is not None:
            found = self.memo.take(self.scope, genre, nonce, result)
            if found is not None:
                return found
        if result.status is not CallStatus.OK:
            return JudgmentRead(result, {"status": result.status.value, "error": result.error,
                                  "error_kind": result.error_kind})
        keys, known, ids = self._question_ids(genre)
        try:
            judgment = read_judgment(reply_of(result.text, result.parsed), keys, known,
                                     self.rubric.score_range, nonce)
        except JudgmentError as exc:
            return JudgmentRead(result, invalid_columns(str(exc), exc.analysis))
        # short keys (exactly the genre's, checked above) are stored as the question ids
        scores = judgment.scores if ids is None else {
            qid: judgment.scores[key] for key, qid in zip(keys, ids, strict=True)}
        try:
            columns = self.scored(genre, scores, judgment.analysis)
        except ValueError as exc:  # scoring.py refusing the scores
            return JudgmentRead(result, invalid_columns(str(exc), judgment.analysis))
        return JudgmentRead(result, columns, scores, columns.get(self.main))


def invalid_columns(error: str, analysis: str | None) -> dict[str, Any]:
    return {"status": CallStatus.PARSE_ERROR.value, "error": error,
            "error_kind": INVALID_JUDGMENT, "analysis": analysis}


# The prefetch's reads, for the judge stage of the same process.
PREFETCHED_READS: ReadMemo[JudgmentRead] = ReadMemo()
