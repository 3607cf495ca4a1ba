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

    @model_validator(mode="after")
    def _needs_something(self) -> Self:
        if not (self.need_genre or self.need_set):
            raise ValueError("a label request must ask for the genre, the set, or both")
        return self


class LabelResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    status: LabelStatus
    genre: Genre | None = None
    prompt_set: PromptSetLabel | None = None
    evidence: str = ""
    error: str | None = None

    @model_validator(mode="after")
    def _failures_carry_no_label(self) -> Self:
        if self.status != LabelStatus.OK and (self.genre or self.prompt_set):
            raise ValueError(f"a {self.status.value} result cannot carry a label")
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

_PART_FIELDS = frozenset({"prompt_text", "genre_values", "set_values"})
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

    @model_validator(mode="after")
    def _known_placeholders(self) -> Self:
        for name in ("system", "user", "genre_task", "set_task", "answer_format"):
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
    return resource("rubrics") / "classify" / "classify_prompt.v2.yaml"


def load_label_template(path: Path | str | None = None) -> LabelPromptTemplate:
    return load_model(LabelPromptTemplate,
                      path if path is not None else default_template_path(),
                      "label prompt template")


def render_label_prompt(template: LabelPromptTemplate, request: LabelRequest) -> RenderedPrompt:
    genre_values = " | ".join(f'"{g.value}"' for g in Genre)
    set_values = " | ".join(f'"{s.value}"' for s in PromptSetLabel)
    fields = {
        "prompt_text": request.text,
        "genre_values": genre_values if request.need_genre else "null",
        "set_values": set_values if request.need_set else "null",
    }
    parts = []
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


def quoted_in_prompt(evidence: str, prompt_text: str) -> bool:
    """Whether ``evidence`` is a passage of the prompt: after the normalisation the prompt
    had (``normalize_text``), as it is or without one pair of quotation marks around it, a
    substring of the prompt with at least one letter or digit in it."""
    prompt = normalize_text(prompt_text)
    quote = normalize_text(evidence)
    candidates = [quote]
    if len(quote) >= 2 and quote[0] + quote[-1] in _QUOTE_PAIRS:
        candidates.append(quote[1:-1].strip())
    return any(any(ch.isalnum() for ch in c) and c in prompt for c in candidates)


def parse_label_reply(reply: str, request: LabelRequest) -> LabelResult:
    """The reply as a result; only the requested labels are read. The steps:

    1. the reply is exactly one JSON object (``llm.structured.reply_object``: a code fence
       allowed; no second object, no text around it, no key twice), else ``parse_error``;
    2. each requested label: null is the model declining (``refused``, its evidence the
       reason); missing or not an allowed value is a ``parse_error``;
    3. the evidence of a label is a passage of the prompt (:func:`quoted_in_prompt`), else
       ``parse_error``: a label with made-up or copied-template evidence is no label.
    """
    try:
        answer = reply_object(reply)
    except StructuredError as exc:
        return LabelResult.failure(LabelStatus.PARSE_ERROR, f"{exc}: {reply[:200]!r}")
    raw_evidence = answer.get("evidence")
    evidence = raw_evidence if isinstance(raw_evidence, str) else ""
    wanted: list[tuple[str, type[StrEnum], Mapping[str, StrEnum]]] = []
    if request.need_genre:
        wanted.append(("genre", Genre, _CHINESE_GENRE))
    if request.need_set:
        wanted.append(("prompt_set", PromptSetLabel, _CHINESE_SET))
    labels: dict[str, StrEnum] = {}
    for key, enum, chinese in wanted:
        if key not in answer:
            return LabelResult.failure(LabelStatus.PARSE_ERROR, f"reply has no {key!r}: {answer}")
        value = answer[key]
        if value is None:
            return LabelResult.failure(LabelStatus.REFUSED, f"model gave no {key}: {evidence}")
        label = chinese.get(str(value).strip()) or next(
            (m for m in enum if m.value == str(value).strip().lower()), None)
        if label is None:
            return LabelResult.failure(LabelStatus.PARSE_ERROR, f"{key} {value!r} is not one of "
                                       f"{[m.value for m in enum]}")
        labels[key] = label
    if not quoted_in_prompt(evidence, request.text):
        return LabelResult.failure(
            LabelStatus.PARSE_ERROR,
            f"evidence {str(raw_evidence)[:200]!r} is not a passage of the prompt (it must be "
            f"copied from it verbatim): labels {', '.join(v.value for v in labels.values())} "
            "rejected")
    return LabelResult.model_validate({"status": LabelStatus.OK, "evidence": evidence, **labels})
