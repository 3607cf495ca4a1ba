"""Which genre did the essay choose: the judge's call for prompts without a single genre.

A prompt that leaves the genre open (文体不限: ``allowed_genres == ["any"]``) or offers a
choice (议论文或记叙文: several allowed genres) has a null ``genre`` in the prompt set. Its
essay is scored with the rubric of the genre the essay was actually written in, and that
is asked of each judge in a separate structured call before the judgment
(``rubrics/essay/genre_prompt.v1.yaml``): the answer is an enum of the prompt's allowed
genres (every genre of the rubric for an open prompt). The call goes through the gateway
like any other, so it is in the ledger with its own status and a rerun pays nothing twice.

The call carries the judge prompt v2 defences: the prompt and the essay sit between
per-call markers, a reminder follows the essay, and the reply must echo the call's nonce.
The reply is read strictly (``llm.structured``): exactly one JSON object with exactly the
keys ``nonce`` and ``genre``. A failed call or an unreadable answer makes the essay's
judgment a failure (:func:`genre_failure`); no default genre is ever assumed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from string import Template
from typing import Any

from pydantic import Field, StrictInt, model_validator

from essaybench.bench.rubrics import (
    Id,
    Rubric,
    Text,
    VersionedFile,
    check_template,
    load_validated,
    rubrics_dir,
)
from essaybench.core.hashing import content_hash
from essaybench.llm.structured import StructuredError, reply_object, reply_of
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message

ANY_GENRE = "any"  # allowed_genres of an open prompt (文体不限)
GENRE_CALL_SUFFIX = "#genre"  # appended to the essay tag of the genre call
INVALID_GENRE = "invalid_genre"  # a reply came, but it names no allowed genre
GENRE_ERROR_PREFIX = "genre_"  # error_kind of a judgment whose genre call failed
SOURCE_PROMPT = "prompt"  # genre_source: the prompt decided the genre
SOURCE_JUDGE = "judge"  # genre_source: the judge said which genre the essay chose

_GENRE_PLACEHOLDERS = ("choices", "genre_ids", "marker", "nonce")


class GenrePrompt(VersionedFile):
    """rubrics/essay/genre_prompt.v<N>.yaml; ``$name`` placeholders, ``$$`` for $."""

    id: Id
    version: StrictInt = Field(ge=1)
    description: Text
    system: Text
    user: Text

    @model_validator(mode="after")
    def _placeholders(self) -> GenrePrompt:
        check_template("system", self.system, _GENRE_PLACEHOLDERS, required=("choices",))
        check_template("user", self.user, (*_GENRE_PLACEHOLDERS, "prompt_text", "essay_text"),
                       required=("prompt_text", "essay_text", "nonce", "marker"))
        return self


DEFAULT_GENRE_PROMPT = "genre_prompt.v1.yaml"


@lru_cache(maxsize=4)
def load_genre_prompt(path: str | None = None) -> GenrePrompt:
    return load_validated(GenrePrompt, Path(path) if path is not None
                          else rubrics_dir() / DEFAULT_GENRE_PROMPT, "genre prompt")


def needs_genre_call(genre: Any) -> bool:
    """Whether an essay's genre is left to the essay (its prompt has no single genre)."""
    return genre is None


def allowed_list(allowed: Any) -> list[str]:
    """``allowed_genres`` as stored (a list, or the JSON text of one, or null)."""
    if allowed is None:
        return []
    if isinstance(allowed, str):
        allowed = json.loads(allowed)
    return [str(g) for g in allowed]


def candidate_genres(allowed: Any, rubric: Rubric) -> list[str]:
    """The genres the judge may answer: the prompt's allowed genres, or every genre of
    the rubric for an open prompt. ValueError naming the prompt's list when the rubric
    has none of them (or the list is empty: such a prompt cannot be in a prompt set)."""
    names = allowed_list(allowed)
    if ANY_GENRE in names:
        return list(rubric.genres)
    known = [g for g in names if g in rubric.genres]
    if not known:
        raise ValueError(f"allowed_genres {names} name no genre of rubric {rubric.id} "
                         f"v{rubric.version} ({sorted(rubric.genres)})")
    return known


@dataclass(frozen=True)
class GenreCall:
    """The genre call of one (essay, judge): the request and what its reply must be."""

    request: ChatRequest
    candidates: tuple[str, ...]
    nonce: str


def genre_call(judge: str, essay: Mapping[str, Any], rubric: Rubric, tag: str,
               stage: str, max_tokens: int, temperature: float,
               prompt: GenrePrompt | None = None) -> GenreCall:
    """The request asking ``judge`` which genre ``essay`` (a row of the essays table,
    with ``allowed_genres``) was written in."""
    template = prompt or load_genre_prompt()
    candidates = candidate_genres(essay.get("allowed_genres"), rubric)
    prompt_text, essay_text = str(essay["prompt_text"]), str(essay["essay_text"])
    # As judge_prompt.v2: a hash of the call, so the same call gets the same tokens (the
    # ledger serves it again) and no essay can contain its own.
    digest = content_hash([template.fingerprint, rubric.fingerprint, candidates,
                           prompt_text, essay_text], 24)
    marker, nonce = digest[:8].upper(), digest[8:]
    values = {"choices": "\n".join(f"- {g}：{rubric.genre(g).name_zh}" for g in candidates),
              "genre_ids": ", ".join(candidates), "marker": marker, "nonce": nonce}
    system = Template(template.system).substitute(values).strip()
    user = Template(template.user).substitute(values, prompt_text=prompt_text,
                                              essay_text=essay_text).strip()
    schema = {"type": "object",
              "properties": {"nonce": {"type": "string", "enum": [nonce]},
                             "genre": {"type": "string", "enum": list(candidates)}},
              "required": ["nonce", "genre"], "additionalProperties": False}
    request = ChatRequest(model=judge, messages=(Message(role="system", content=system),
                                                 Message(role="user", content=user)),
                          params={"temperature": temperature, "max_tokens": max_tokens},
                          response_schema=schema, stage=stage, tag=tag + GENRE_CALL_SUFFIX)
    return GenreCall(request, tuple(candidates), nonce)


class GenreReplyError(ValueError):
    """A genre reply that names no allowed genre, or is not exactly the asked object."""


def read_genre(result: ChatResult, call: GenreCall) -> str:
    """The genre a successful call's reply names; :class:`GenreReplyError` otherwise."""
    try:
        reply = reply_object(reply_of(result.text, result.parsed))
    except StructuredError as exc:
        raise GenreReplyError(str(exc)) from exc
    if set(reply) != {"nonce", "genre"}:
        raise GenreReplyError(f"reply must have exactly the keys nonce and genre, got "
                              f"{sorted(map(str, reply))}")
    if reply["nonce"] != call.nonce:
        raise GenreReplyError("reply does not echo the call's nonce: not this call's answer, "
                              "e.g. one copied from the essay")
    genre = reply["genre"]
    if genre not in call.candidates:
        raise GenreReplyError(f"genre {genre!r} is not one of the prompt's allowed genres "
                              f"{list(call.candidates)}")
    return str(genre)


@dataclass(frozen=True)
class GenreOutcome:
    """One (essay, judge)'s genre: the answer, or why there is none (status, error)."""

    result: ChatResult
    genre: str | None
    status: str
    error_kind: str | None = None
    error: str | None = None


def genre_outcome(result: ChatResult, call: GenreCall) -> GenreOutcome:
    if result.status is not CallStatus.OK:
        return GenreOutcome(result, None, result.status.value,
                            GENRE_ERROR_PREFIX + (result.error_kind or result.status.value),
                            f"genre call failed: {result.error or result.status.value}")
    try:
        return GenreOutcome(result, read_genre(result, call), CallStatus.OK.value)
    except GenreReplyError as exc:
        return GenreOutcome(result, None, CallStatus.PARSE_ERROR.value,
                            GENRE_ERROR_PREFIX + INVALID_GENRE, f"genre reply: {exc}")


def genre_failure(outcome: GenreOutcome) -> dict[str, Any]:
    """The judgment columns of an essay whose genre call failed: a failed judgment with
    the genre call's status and reply, never a score."""
    return {"status": outcome.status, "error_kind": outcome.error_kind,
            "error": outcome.error, "raw_reply": outcome.result.text,
            "judge_returned_model": outcome.result.returned_model,
            "call_key": outcome.result.key, "from_ledger": outcome.result.from_ledger}


def resolve_genres(calls: Mapping[tuple[str, str], GenreCall],
                   results: Sequence[ChatResult]) -> dict[tuple[str, str], GenreOutcome]:
    """(judge, essay tag) → outcome, from the calls (in order) and their results."""
    if len(calls) != len(results):
        raise ValueError(f"{len(calls)} genre calls but {len(results)} results")
    return {key: genre_outcome(result, call)
            for (key, call), result in zip(calls.items(), results, strict=True)}
