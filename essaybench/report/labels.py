"""Names for what the judgments carry as ids: genres, traits and sub-questions, from the rubric.

The judgments name their rubric (``rubric_id``); when it is the built-in rubric the report
shows the trait names and sub-question wording from it, and each trait's mean per
sub-question (1–10, comparable across traits with 3–5 sub-questions). With any other
rubric the ids are shown as they are and trait means stay sums.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from essaybench.bench.rubrics import Rubric, RubricError, load_rubric


@dataclass(frozen=True)
class TraitName:
    genre: str
    name: str
    name_zh: str
    n_questions: int
    order: int  # position in its genre (the rubric's order: depth 0 first)


@dataclass(frozen=True)
class Labels:
    genres_zh: dict[str, str] = field(default_factory=dict)
    traits: dict[str, TraitName] = field(default_factory=dict)
    questions: dict[str, str] = field(default_factory=dict)

    def genre_zh(self, genre: str) -> str | None:
        return self.genres_zh.get(genre)

    def trait(self, trait_id: str) -> str:
        found = self.traits.get(trait_id)
        return found.name if found else trait_id

    def per_question(self, trait_id: str, total: float) -> float:
        """A trait sum as its mean per sub-question (the sum when the trait is unknown)."""
        found = self.traits.get(trait_id)
        return total / found.n_questions if found else total


def _of_rubric(rubric: Rubric) -> Labels:
    traits = {t.id: TraitName(genre, t.name, t.name_zh, len(t.questions), i)
              for genre, g in rubric.genres.items() for i, t in enumerate(g.traits)}
    questions = {q.id: q.text for g in rubric.genres.values() for t in g.traits
                 for q in t.questions}
    return Labels({genre: g.name_zh for genre, g in rubric.genres.items()}, traits, questions)


def labels_for(judgments: pl.DataFrame) -> Labels:
    """The built-in rubric's names when the judgments were scored with it; else none."""
    try:
        rubric = load_rubric()
    except (RubricError, OSError):
        return Labels()
    used = {str(r) for r in judgments["rubric_id"].drop_nulls().to_list()} \
        if "rubric_id" in judgments.columns else set()
    return _of_rubric(rubric) if rubric.id in used else Labels(
        {genre: g.name_zh for genre, g in rubric.genres.items()})
