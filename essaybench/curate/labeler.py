"""The LLM step of classify: one narrow interface, a scripted fake, and the prompt template.

A ``PromptLabeler`` answers one ``LabelRequest`` (a prompt and which labels are
needed) with a ``LabelResult`` that always carries a status. A result whose
status is not ``ok`` never carries a label, so a failed call cannot turn into
one. The real implementation arrives with the LLM gateway: it renders the
versioned template with :func:`render_label_prompt`, sends it, and reads the
reply with :func:`parse_label_reply`. Until then :class:`FakeLabeler` stands in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from string import Template
from typing import Protocol, Self, runtime_checkable

from pydantic import BaseModel, ConfigDict, model_validator

from essaybench.core.paths import resource
from essaybench.core.redact import redact
from essaybench.core.yamlio import load_model
from essaybench.curate.normalize import normalize_text
from essaybench.llm.structured import StructuredError, reply_object


class Genre(StrEnum):
    ARGUMENTATIVE = "argumentative"  # 议论文
    NARRATIVE = "narrative"  # 记叙文
    DESCRIPTIVE = "descriptive"  # 描写文
    EXPOSITORY = "expository"  # 说明文


class PromptSetLabel(StrEnum):
    OPEN = "open"  # genre and topic only
    CONSTRAINED = "constrained"  # also length, audience, material, style ... requirements


class EssayAnswer(StrEnum):
    """The labeller's first answer: does the request ask for an essay at all?"""

    ESSAY = "essay"
    NOT_ESSAY = "not_essay"  # the prompt is kept out of the set, the evidence its reason
    UNSURE = "unsure"  # the prompt goes to review


ANY = "any"  # a genre answer: the prompt leaves the genre to the writer


class LabelStatus(StrEnum):
    OK = "ok"
    PARSE_ERROR = "parse_error"
    API_ERROR = "api_error"
    REFUSED = "refused"


class LabelRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_id: str
    text: str
    need_genre: bool = True
    need_set: bool = False
    # ask first whether the request is an essay at all (templates from v3 on)
    need_essay: bool = False

    @model_validator(mode="after")
    def _needs_something(self) -> Self:
        if not (self.need_genre or self.need_set):
            raise ValueError("a label request must ask for the genre, the set, or both")
        return self


class LabelResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    status: LabelStatus
    essay: EssayAnswer | None = None  # None: not asked (templates before v3)
    genre: Genre | None = None
    # the labeller's open genre (("any",)) or choice of two or more genres; genre is then None
    allowed_genres: tuple[str, ...] = ()
    prompt_set: PromptSetLabel | None = None
    evidence: str = ""
    error: str | None = None

    @model_validator(mode="after")
    def _failures_carry_no_label(self) -> Self:
        if self.status != LabelStatus.OK and (
                self.genre or self.prompt_set or self.essay or self.allowed_genres):
            raise ValueError(f"a {self.status.value} result cannot carry a label")
        if self.essay not in (None, EssayAnswer.ESSAY) and (self.genre or self.allowed_genres):
            raise ValueError(f"a {self.essay} answer carries no genre")
        if self.genre is not None and self.allowed_genres:
            raise ValueError("a result carries a genre or allowed genres, not both")
        return self

    @classmethod
    def failure(cls, status: LabelStatus, error: str) -> LabelResult:
        """A failed label; ``error`` (an exception's or a provider's text) is redacted."""
        return cls(status=status, error=redact(error))


class PromptLabeler(Protocol):
    async def label(self, request: LabelRequest) -> LabelResult: ...


@runtime_checkable
class BatchLabeler(PromptLabeler, Protocol):
    """A labeler that is faster given the whole batch at once (one gateway batch)."""

    async def label_many(self, requests: Sequence[LabelRequest]) -> list[LabelResult]: ...


class FakeLabeler:
    """Scripted answers by prompt_id, or computed by a function of the request.

    Records every request in ``calls`` and the peak number of concurrent calls in
    ``max_in_flight``. A prompt without a scripted answer gets an ``api_error``;
    a function may raise to simulate a crashing client.
    """

    def __init__(
        self,
        answers: Mapping[str, LabelResult] | Callable[[LabelRequest], LabelResult] | None = None,
        *,
        delay: float = 0.0,
    ) -> None:
        self._answers = answers if answers is not None else {}
        self._delay = delay
        self._in_flight = 0
        self.calls: list[LabelRequest] = []
        self.max_in_flight = 0

    async def label(self, request: LabelRequest) -> LabelResult:
        self.calls.append(request)
        self._in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            await asyncio.sleep(self._delay)
            if isinstance(self._answers, Mapping):
                scripted = self._answers.get(request.prompt_id)
                if scripted is None:
                    return LabelResult.failure(
                        LabelStatus.API_ERROR, f"FakeLabeler: no answer for {request.prompt_id}")
                return scripted
            return self._answers(request)
        finally:
            self._in_flight -= 1


# --- the prompt template ----------------------------------------------------------

_PART_FIELDS = frozenset({"prompt_text", "genre_values", "set_values", "essay_values"})
# the user message must place the prompt, the task list and the answer format
_USER_FIELDS = frozenset({"prompt_text", "tasks", "answer_format"})


class LabelPromptTemplate(BaseModel):
    """rubrics/classify/classify_prompt.v<N>.yaml; ``$name`` placeholders, ``$$`` for $."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    version: int
    description: str
    system: str
    user: str
    genre_task: str
    set_task: str
    answer_format: str
    essay_task: str | None = None  # v3 on: is the request an essay at all?

    @property
    def asks_essay(self) -> bool:
        return self.essay_task is not None

    @model_validator(mode="after")
    def _known_placeholders(self) -> Self:
        for name in ("system", "user", "genre_task", "set_task", "answer_format", "essay_task"):
            if getattr(self, name) is None:
                continue
            template = Template(getattr(self, name))
            allowed = _PART_FIELDS | _USER_FIELDS if name == "user" else _PART_FIELDS
            used = set(template.get_identifiers())
            if not template.is_valid() or used - allowed:
                raise ValueError(f"{name}: unknown or malformed placeholders "
                                 f"{sorted(used - allowed)}; allowed: {sorted(allowed)}")
            if name == "user" and _USER_FIELDS - used:
                raise ValueError(f"user: missing placeholders {sorted(_USER_FIELDS - used)}")
        return self


@dataclass(frozen=True)
class RenderedPrompt:
    template_id: str
    template_version: int
    system: str
    user: str


def default_template_path() -> Path:
    return resource("rubrics") / "classify" / "classify_prompt.v3.yaml"


def load_label_template(path: Path | str | None = None) -> LabelPromptTemplate:
    return load_model(LabelPromptTemplate,
                      path if path is not None else default_template_path(),
                      "label prompt template")


def render_label_prompt(template: LabelPromptTemplate, request: LabelRequest) -> RenderedPrompt:
    if request.need_essay and template.essay_task is None:
        raise ValueError(f"{template.id} v{template.version} cannot ask whether a prompt is an "
                         "essay (no essay_task); use version 3 or later")
    genre_values = " | ".join(f'"{g.value}"' for g in Genre)
    if request.need_essay:
        genre_values += f' | "{ANY}" | [two or more genres] | null'
    set_values = " | ".join(f'"{s.value}"' for s in PromptSetLabel)
    fields = {
        "prompt_text": request.text,
        "essay_values": (" | ".join(f'"{e.value}"' for e in EssayAnswer) if request.need_essay
                         else "null"),
        "genre_values": genre_values if request.need_genre else "null",
        "set_values": set_values if request.need_set else "null",
    }
    parts = []
    if request.need_essay and template.essay_task is not None:
        parts.append(template.essay_task)
    if request.need_genre:
        parts.append(template.genre_task)
    if request.need_set:
        parts.append(template.set_task)
    user_fields = {
        **fields,
        "tasks": "\n".join(Template(p).substitute(fields).strip() for p in parts),
        "answer_format": Template(template.answer_format).substitute(fields).strip(),
    }
    return RenderedPrompt(template.id, template.version,
                          Template(template.system).substitute(fields).strip(),
                          Template(template.user).substitute(user_fields).strip())


# --- reading a reply --------------------------------------------------------------

_CHINESE_GENRE = {"议论文": Genre.ARGUMENTATIVE, "记叙文": Genre.NARRATIVE,
                  "描写文": Genre.DESCRIPTIVE, "说明文": Genre.EXPOSITORY}
_CHINESE_SET = {"开放式": PromptSetLabel.OPEN, "限制式": PromptSetLabel.CONSTRAINED}


# One pair of quotation marks a model may put around the passage it quotes.
_QUOTE_PAIRS = ("“”", "\"\"", "''", "‘’", "「」", "『』")


def passage_at(evidence: str, prompt_text: str) -> tuple[int, int] | None:
    """Where ``evidence`` first occurs in the prompt as normalised (``normalize_text``): as
    it is or without one pair of quotation marks around it, with at least one letter or
    digit in it; None when it is no passage of the prompt."""
    prompt = normalize_text(prompt_text)
    quote = normalize_text(evidence)
    candidates = [quote]
    if len(quote) >= 2 and quote[0] + quote[-1] in _QUOTE_PAIRS:
        candidates.append(quote[1:-1].strip())
    for candidate in candidates:
        at = prompt.find(candidate) if any(ch.isalnum() for ch in candidate) else -1
        if at >= 0:
            return at, at + len(candidate)
    return None


def quoted_in_prompt(evidence: str, prompt_text: str) -> bool:
    """Whether ``evidence`` is a passage of the prompt (:func:`passage_at`)."""
    return passage_at(evidence, prompt_text) is not None


def _genre_answer(value: object, request: LabelRequest) -> tuple[Genre | None, tuple[str, ...]]:
    """A genre answer as (genre, allowed genres); ValueError when it is neither. A choice
    (a list of two or more genres) and ``any`` only where the request asked the v3 way."""
    words = value if isinstance(value, list) and request.need_essay else [value]
    found: list[Genre] = []
    for word in words:
        text = str(word).strip()
        if request.need_essay and text.lower() in (ANY, "文体不限") and len(words) == 1:
            return None, (ANY,)
        genre = _CHINESE_GENRE.get(text) or next(
            (g for g in Genre if g.value == text.lower()), None)
        if genre is None:
            raise ValueError(f"genre {value!r} is not one of {[g.value for g in Genre]}"
                             + (f", {ANY!r} or a list of genres" if request.need_essay else ""))
        if genre not in found:
            found.append(genre)
    if not found:
        raise ValueError("genre is an empty list")
    if len(found) == 1:
        return found[0], ()
    return None, tuple(g.value for g in Genre if g in found)


def parse_label_reply(reply: str, request: LabelRequest) -> LabelResult:
    """The reply as a result; only the requested labels are read. The steps:

    1. the reply is exactly one JSON object (``llm.structured.reply_object``: a code fence
       allowed; no second object, no text around it, no key twice), else ``parse_error``;
    2. asked whether the request is an essay (v3): ``essay`` | ``not_essay`` | ``unsure``;
       null is the model declining (``refused``); ``not_essay`` and ``unsure`` end the
       answer (no genre or set is read), ``not_essay`` with its evidence as the reason;
    3. each requested label: null is the model declining (``refused``, its evidence the
       reason); missing or not an allowed value is a ``parse_error``; asked the v3 way, the
       genre may also be ``any`` or a list of two or more genres (a choice);
    4. the evidence of a label (and of ``not_essay``) is a passage of the prompt
       (:func:`quoted_in_prompt`), else ``parse_error``: a label with made-up or
       copied-template evidence is no label.
    """
    try:
        answer = reply_object(reply)
    except StructuredError as exc:
        return LabelResult.failure(LabelStatus.PARSE_ERROR, f"{exc}: {reply[:200]!r}")
    raw_evidence = answer.get("evidence")
    evidence = raw_evidence if isinstance(raw_evidence, str) else ""
    essay: EssayAnswer | None = None
    if request.need_essay:
        if "essay" not in answer:
            return LabelResult.failure(LabelStatus.PARSE_ERROR, f"reply has no 'essay': {answer}")
        if answer["essay"] is None:
            return LabelResult.failure(LabelStatus.REFUSED,
                                       f"model gave no essay answer: {evidence}")
        essay = next((e for e in EssayAnswer if e.value == str(answer["essay"]).strip().lower()),
                     None)
        if essay is None:
            return LabelResult.failure(LabelStatus.PARSE_ERROR, f"essay {answer['essay']!r} is "
                                       f"not one of {[e.value for e in EssayAnswer]}")
        if essay is EssayAnswer.UNSURE:
            return LabelResult(status=LabelStatus.OK, essay=essay, evidence=evidence)
        if essay is EssayAnswer.NOT_ESSAY:
            if not quoted_in_prompt(evidence, request.text):
                return LabelResult.failure(
                    LabelStatus.PARSE_ERROR, f"evidence {str(raw_evidence)[:200]!r} is not a "
                    "passage of the prompt (it must be copied from it verbatim): not_essay "
                    "rejected")
            return LabelResult(status=LabelStatus.OK, essay=essay, evidence=evidence)
    labels: dict[str, object] = {}
    if request.need_genre:
        if "genre" not in answer:
            return LabelResult.failure(LabelStatus.PARSE_ERROR, f"reply has no 'genre': {answer}")
        if answer["genre"] is None:
            return LabelResult.failure(LabelStatus.REFUSED, f"model gave no genre: {evidence}")
        try:
            labels["genre"], labels["allowed_genres"] = _genre_answer(answer["genre"], request)
        except ValueError as exc:
            return LabelResult.failure(LabelStatus.PARSE_ERROR, str(exc))
    if request.need_set:
        if "prompt_set" not in answer:
            return LabelResult.failure(LabelStatus.PARSE_ERROR,
                                       f"reply has no 'prompt_set': {answer}")
        value = answer["prompt_set"]
        if value is None:
            return LabelResult.failure(LabelStatus.REFUSED,
                                       f"model gave no prompt_set: {evidence}")
        pset = _CHINESE_SET.get(str(value).strip()) or next(
            (m for m in PromptSetLabel if m.value == str(value).strip().lower()), None)
        if pset is None:
            return LabelResult.failure(LabelStatus.PARSE_ERROR, f"prompt_set {value!r} is not "
                                       f"one of {[m.value for m in PromptSetLabel]}")
        labels["prompt_set"] = pset
    if not quoted_in_prompt(evidence, request.text):
        shown = [str(v) for k, v in labels.items() if v and k != "allowed_genres"] + [
            "|".join(labels.get("allowed_genres") or ())]  # type: ignore[arg-type]
        return LabelResult.failure(
            LabelStatus.PARSE_ERROR,
            f"evidence {str(raw_evidence)[:200]!r} is not a passage of the prompt (it must be "
            f"copied from it verbatim): labels {', '.join(x for x in shown if x)} rejected")
    return LabelResult.model_validate({"status": LabelStatus.OK, "essay": essay,
                                       "evidence": evidence, **labels})
