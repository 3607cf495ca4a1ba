"""WritingPreferenceBench (Chinese half): 20 LLMs × 204 prompts, one human score 0–3 each.

The data directory (never copied into the project) holds, per its README.txt:

* ``prompts.jsonl`` — question_id, prompt, __internal_tags__
* ``responses_scores.jsonl`` — question_id, model_dir, tag, predict0 (the
  response; null where the source lacked it), completion_tokens, word_len,
  score (0–3), comment, original_item_index; for 5 models also score_alt and
  comment_alt (a second annotator's score).
* ``models.jsonl`` — model_dir, score_file, score_alt_file, has_responses, n_scored

Every row is validated (unknown fields are errors; messages name file and line).
``cjk_chars`` is counted here from predict0 (Chinese ideographs only), rather
than trusted from the source's ``word_len``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, TypeVar

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from essaybench.constraints.counting import count_chinese_chars
from essaybench.core.errors import UserError
from essaybench.core.jsonlines import numbered_json_lines

PROMPTS = "prompts.jsonl"
RESPONSES = "responses_scores.jsonl"
MODELS = "models.jsonl"

Score = Annotated[int, Field(ge=0, le=3, strict=True)]
Count = Annotated[int, Field(ge=0, strict=True)]


class WpbDataError(UserError, ValueError):
    """The WritingPreferenceBench directory is missing a file or holds an invalid row."""


class WpbPrompt(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    question_id: str = Field(min_length=1)
    prompt: str
    tags: list[str] = Field(alias="__internal_tags__")


class WpbResponse(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    question_id: str = Field(min_length=1)
    model_dir: str = Field(min_length=1)
    tag: str
    predict0: str | None
    completion_tokens: Count | None
    word_len: Count | None
    score: Score
    comment: str | None = None
    original_item_index: Count
    score_alt: Score | None = None
    comment_alt: str | None = None


class WpbModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model_dir: str = Field(min_length=1)
    score_file: str
    score_alt_file: str | None
    has_responses: bool
    n_scored: Count


@dataclass(frozen=True)
class WpbData:
    responses: pl.DataFrame  # one row per (question_id, model); see RESPONSE_SCHEMA
    prompts: pl.DataFrame  # question_id, prompt, tag
    models: pl.DataFrame  # model, model_dir, has_responses, n_scored, has_alt


RESPONSE_SCHEMA: dict[str, type[pl.DataType]] = {
    "question_id": pl.Utf8, "model": pl.Utf8, "model_dir": pl.Utf8, "tag": pl.Utf8,
    "predict0": pl.Utf8, "completion_tokens": pl.Int64, "word_len": pl.Int64,
    "cjk_chars": pl.Int64, "score": pl.Int64, "score_alt": pl.Int64,
}

Row = TypeVar("Row", WpbPrompt, WpbResponse, WpbModel)


def cjk_chars(text: str) -> int:
    """Chinese ideographs in ``text``; punctuation, digits, Latin letters do not count."""
    return count_chinese_chars(text)


def model_name(model_dir: str) -> str:
    """The readable model name: the directory without its ``_<random id>`` suffix."""
    head, sep, _ = model_dir.rpartition("_")
    return head if sep else model_dir


def _rows(path: Path, model: type[Row]) -> Iterator[tuple[int, Row]]:
    if not path.is_file():
        raise WpbDataError(f"{path}: missing (is this a WritingPreferenceBench data directory?)")
    for number, value in numbered_json_lines(path, WpbDataError):
        try:
            yield number, model.model_validate(value)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"])
            raise WpbDataError(f"{path}:{number}: field {field!r}: {err['msg']}") from exc


def load_wpb(data_dir: Path | str) -> WpbData:
    """Load and cross-check the three files; raises :class:`WpbDataError`."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise WpbDataError(f"{data_dir}: WritingPreferenceBench data directory not found")
    prompts: dict[str, WpbPrompt] = {}
    for line, prompt in _rows(data_dir / PROMPTS, WpbPrompt):
        if prompt.question_id in prompts:
            raise WpbDataError(f"{data_dir / PROMPTS}:{line}: duplicate question_id "
                               f"{prompt.question_id!r}")
        prompts[prompt.question_id] = prompt
    models: dict[str, WpbModel] = {}
    for line, entry in _rows(data_dir / MODELS, WpbModel):
        if entry.model_dir in models:
            raise WpbDataError(f"{data_dir / MODELS}:{line}: duplicate model_dir "
                               f"{entry.model_dir!r}")
        models[entry.model_dir] = entry
    names = [model_name(m) for m in models]
    if len(set(names)) != len(names):
        raise WpbDataError(f"{data_dir / MODELS}: model names collide after removing the "
                           f"directory suffix: {sorted(names)}")

    responses_path = data_dir / RESPONSES
    seen: dict[tuple[str, str], int] = {}
    records = []
    for line, row in _rows(responses_path, WpbResponse):
        where = f"{responses_path}:{line}"
        if row.question_id not in prompts:
            raise WpbDataError(f"{where}: question_id {row.question_id!r} not in {PROMPTS}")
        if row.model_dir not in models:
            raise WpbDataError(f"{where}: model_dir {row.model_dir!r} not in {MODELS}")
        key = (row.question_id, row.model_dir)
        if key in seen:
            raise WpbDataError(f"{where}: duplicate of line {seen[key]} {key}")
        seen[key] = line
        records.append({
            "question_id": row.question_id, "model": model_name(row.model_dir),
            "model_dir": row.model_dir, "tag": row.tag, "predict0": row.predict0,
            "completion_tokens": row.completion_tokens, "word_len": row.word_len,
            "cjk_chars": None if row.predict0 is None else cjk_chars(row.predict0),
            "score": row.score, "score_alt": row.score_alt})
    responses = pl.DataFrame(records, schema=RESPONSE_SCHEMA)
    if responses.is_empty():
        raise WpbDataError(f"{responses_path}: no responses")

    has_alt = set(responses.filter(pl.col("score_alt").is_not_null())["model_dir"].to_list())
    models_df = pl.DataFrame(
        [{"model": model_name(m.model_dir), "model_dir": m.model_dir,
          "has_responses": m.has_responses, "n_scored": m.n_scored,
          "has_alt": m.model_dir in has_alt} for m in models.values()],
        schema={"model": pl.Utf8, "model_dir": pl.Utf8, "has_responses": pl.Boolean,
                "n_scored": pl.Int64, "has_alt": pl.Boolean}).sort("model")
    prompts_df = pl.DataFrame(
        [{"question_id": p.question_id, "prompt": p.prompt,
          "tag": p.tags[0] if p.tags else None} for p in prompts.values()],
        schema={"question_id": pl.Utf8, "prompt": pl.Utf8, "tag": pl.Utf8})
    return WpbData(responses=responses, prompts=prompts_df, models=models_df)
