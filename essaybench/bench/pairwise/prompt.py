"""The pairwise judge prompt (``rubrics/pairwise/pairwise_judge.v<N>.yaml``) and its answer.

The wording lives in the YAML file; the criteria come from the genre rubric's traits
(the same rubric the absolute judge uses), so nothing is written twice. The answer is
one JSON object ``{"analysis": ..., "verdict": "A" | "B" | "tie"}`` whose verdict names
a *position*: "A" is the essay shown first.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from string import Template
from typing import Any, Self

from pydantic import Field, StrictInt, model_validator

from essaybench.bench.rubrics import Id, Rubric, Text, VersionedFile, check_template, load_validated
from essaybench.core.paths import resource

VERDICTS = ("A", "B", "tie")  # positions: A = shown first, B = shown second

_COMMON = ("genre", "genre_zh")
_USER = ("prompt_text", "essay_a", "essay_b", "criteria", "answer_format")


class PairwisePrompt(VersionedFile):
    """rubrics/pairwise/pairwise_judge.v<N>.yaml; ``$name`` placeholders, ``$$`` for $."""

    id: Id
    version: StrictInt = Field(ge=1)
    description: Text
    system: Text
    criterion_line: Text
    question_separator: str
    example_analysis: Text
    example_verdict: Text
    answer_format: Text
    user: Text

    @model_validator(mode="after")
    def _placeholders(self) -> Self:
        check_template("system", self.system, _COMMON)
        check_template("criterion_line", self.criterion_line,
                        ("trait_id", "trait_name", "trait_name_zh", "questions"))
        check_template("example_analysis", self.example_analysis, ())
        check_template("example_verdict", self.example_verdict, ())
        check_template("answer_format", self.answer_format,
                        (*_COMMON, "answer_example", "analysis_max_chars"),
                        required=("answer_example",))
        check_template("user", self.user, (*_COMMON, *_USER), required=_USER)
        return self


def pairwise_dir() -> Path:
    return resource("rubrics") / "pairwise"


def load_pairwise_prompt(path: Path | str | None = None) -> PairwisePrompt:
    """A pairwise prompt file (default: the built-in ``pairwise_judge.v1.yaml``)."""
    return load_validated(PairwisePrompt,
                          path if path is not None else pairwise_dir() / "pairwise_judge.v1.yaml",
                          "pairwise prompt")


@lru_cache(maxsize=1)
def default_pairwise_prompt() -> PairwisePrompt:
    return load_pairwise_prompt()


def pairwise_answer_schema(analysis_max_chars: int) -> dict[str, Any]:
    """JSON schema of the reply (usable as a llama.cpp grammar: bounded string, enum)."""
    return {
        "type": "object",
        "properties": {  # analysis first, so a grammar makes the judge reason before deciding
            "analysis": {"type": "string", "maxLength": analysis_max_chars},
            "verdict": {"type": "string", "enum": list(VERDICTS)},
        },
        "required": ["analysis", "verdict"],
        "additionalProperties": False,
    }


def criteria_text(prompt: PairwisePrompt, rubric: Rubric, genre: str) -> str:
    """One line per trait of ``genre``'s rubric, its sub-questions summarised on the line."""
    lines = []
    for trait in rubric.genre(genre).traits:
        questions = prompt.question_separator.join(q.text.strip() for q in trait.questions)
        lines.append(Template(prompt.criterion_line).substitute(
            trait_id=trait.id, trait_name=trait.name, trait_name_zh=trait.name_zh,
            questions=questions).strip())
    return "\n".join(lines)


def render_pairwise_messages(rubric: Rubric, genre: str, prompt_text: str, essay_a: str,
                             essay_b: str, analysis_max_chars: int,
                             prompt: PairwisePrompt | None = None) -> list[dict[str, str]]:
    """System and user messages: ``essay_a`` is shown first (position A)."""
    prompt = prompt if prompt is not None else default_pairwise_prompt()
    common = {"genre": genre, "genre_zh": rubric.genre(genre).name_zh}
    example = json.dumps({"analysis": prompt.example_analysis.strip(),
                          "verdict": prompt.example_verdict.strip()}, ensure_ascii=False)
    answer_format = Template(prompt.answer_format).substitute(
        common, answer_example=example, analysis_max_chars=str(analysis_max_chars))
    user = Template(prompt.user).substitute(
        common, prompt_text=prompt_text, essay_a=essay_a, essay_b=essay_b,
        criteria=criteria_text(prompt, rubric, genre), answer_format=answer_format.strip())
    return [{"role": "system", "content": Template(prompt.system).substitute(common).strip()},
            {"role": "user", "content": user.strip()}]
