"""The real ``PromptLabeler``: the classify template sent through the LLM gateway.

One label request becomes one ``ChatRequest`` (stage ``classify``, tag = prompt id)
whose identity is the rendered prompt, the model and its parameters, so a rerun is
served from the ledger and a new template version is a new call. The reply is read
by :func:`parse_label_reply` on the raw text, the one definition of the answer
format shared with every other labeler; the JSON schema only constrains decoding
(and lets the gateway re-ask) so the reply is well-formed before it gets there.

A call that did not end ``ok`` never yields a label: the gateway's status is mapped
to a label status and the reply, if any, is kept as evidence in ``error``. Nor does an
answer whose evidence, though a passage of the prompt, shows nothing: one character,
only digits or punctuation (``meaningful_evidence``: at least four letters, CJK
characters counting as letters, or a genre word or cue of the rules, e.g. 经历).

Batching: ``Gateway.run`` closes its HTTP clients when a batch ends, so two batches
must never overlap on one gateway. Every ``label`` and ``label_many`` call therefore
goes through one queue: calls that arrive together (classify gathers them) are sent
as one gateway batch, and a batch starts only when the previous one has ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from essaybench.curate.evidence import MIN_EVIDENCE_CHARS, letters
from essaybench.curate.label_budget import answer_max_tokens
from essaybench.curate.labeler import (
    ANY,
    EssayAnswer,
    Genre,
    LabelPromptTemplate,
    LabelRequest,
    LabelResult,
    LabelStatus,
    PromptSetLabel,
    load_label_template,
    parse_label_reply,
    render_label_prompt,
)
from essaybench.curate.normalize import normalize_text
from essaybench.llm.gateway import Gateway
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message

STAGE = "classify"
EVIDENCE_MAX_CHARS = 200  # max_tokens is derived from it (curate/label_budget.py)
_EXCERPT_CHARS = 200
MIN_EVIDENCE_LETTERS = MIN_EVIDENCE_CHARS  # letters (a CJK character is one) in evidence

_STATUS: dict[CallStatus, LabelStatus] = {
    CallStatus.PARSE_ERROR: LabelStatus.PARSE_ERROR,
    CallStatus.TRUNCATED: LabelStatus.PARSE_ERROR,
    CallStatus.API_ERROR: LabelStatus.API_ERROR,
    CallStatus.SKIPPED: LabelStatus.API_ERROR,
    CallStatus.REFUSED: LabelStatus.REFUSED,
}


def _label_field(values: list[str]) -> dict[str, Any]:
    # enum, not a pattern or bounds: grammar-constrained decoders (llama.cpp) honour enums.
    return {"type": ["string", "null"], "enum": [*values, None]}


def label_schema(request: LabelRequest, essay_key: bool | None = None) -> dict[str, Any]:
    """The JSON schema of the answer the rendered template asks for.

    The template's answer line always shows all its keys and writes ``null`` for a
    label that is not asked, so the schema keeps that key too, pinned to null:
    a reply that follows the prompt word for word must also pass the schema (on
    endpoints without constrained decoding a mismatch would cost a re-ask per call).
    A requested label may be null: that is the model declining, read as ``refused``.
    ``essay_key``: the template has the ``essay`` key (v3 on; default: the request asks it).
    Asked the v3 way, the genre may be null after a not_essay/unsure answer, ``any``, or a
    list of two or more genres.
    """
    with_essay = request.need_essay if essay_key is None else essay_key
    genres = [g.value for g in Genre]
    genre: dict[str, Any] = {"type": "null"}
    if request.need_genre and request.need_essay:
        genre = {"anyOf": [_label_field([*genres, ANY]),
                           {"type": "array", "items": {"type": "string", "enum": genres},
                            "minItems": 2, "maxItems": len(genres), "uniqueItems": True}]}
    elif request.need_genre:
        genre = _label_field(genres)
    pset = (_label_field([s.value for s in PromptSetLabel]) if request.need_set
            else {"type": "null"})
    properties: dict[str, Any] = {}
    if with_essay:
        properties["essay"] = (_label_field([e.value for e in EssayAnswer])
                               if request.need_essay else {"type": "null"})
    properties.update({
        "genre": genre,
        "prompt_set": pset,
        "evidence": {"type": "string", "maxLength": EVIDENCE_MAX_CHARS},
    })
    return {
        "title": "classify_label",
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _excerpt(text: str | None) -> str:
    if not text:
        return "no reply text"
    cut = text[:_EXCERPT_CHARS]
    return f"reply: {cut!r}" + ("..." if len(text) > _EXCERPT_CHARS else "")


def meaningful_evidence(evidence: str) -> bool:
    """Whether ``evidence`` (a passage of the prompt) can show a label: at least
    ``MIN_EVIDENCE_LETTERS`` letters (a CJK character is one; digits and punctuation are
    none). A two-character cue alone (经历) is not enough either (issue 30): classify then
    checks that the passage holds a cue in the task (``curate.evidence``)."""
    return letters(normalize_text(evidence)) >= MIN_EVIDENCE_LETTERS


def to_label_result(result: ChatResult, request: LabelRequest) -> LabelResult:
    """A gateway result as a label result; only an ``ok`` call is read for labels, and
    only when its evidence is meaningful."""
    if result.status is CallStatus.OK:
        if result.text is None:
            return LabelResult.failure(LabelStatus.PARSE_ERROR, "ok call without reply text")
        label = parse_label_reply(result.text, request)
        if (label.status is LabelStatus.OK and label.essay is not EssayAnswer.UNSURE
                and not meaningful_evidence(label.evidence)):
            answer = [v for v in (label.essay, label.genre, label.prompt_set) if v] + list(
                label.allowed_genres)
            return LabelResult.failure(
                LabelStatus.PARSE_ERROR,
                f"evidence {label.evidence!r} shows nothing (at least {MIN_EVIDENCE_LETTERS} "
                f"characters of the prompt that are not digits or punctuation): "
                f"{', '.join(answer)} rejected")
        return label
    status = _STATUS[result.status]
    error = f"{result.status.value}: {result.error or result.error_kind or 'no detail'}"
    if status is LabelStatus.PARSE_ERROR:
        error = f"{error}; {_excerpt(result.text)}"
    return LabelResult.failure(status, error)


@dataclass(frozen=True)
class _Queued:
    request: LabelRequest
    chat: ChatRequest
    future: asyncio.Future[LabelResult]


class GatewayLabeler:
    """Labels prompts with ``model`` through ``gateway``; see the module docstring."""

    def __init__(
        self,
        gateway: Gateway,
        model: str,
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        template: LabelPromptTemplate | None = None,
    ) -> None:
        spec = gateway.spec(model)  # an unknown model fails here, not once per prompt
        self.gateway = gateway
        self.model = model
        self.template = template if template is not None else load_label_template()
        # the longest answer the template's schema allows, at the model's tokens per
        # character: a fixed 256 cut Chinese evidence off (issue 30, item 5)
        widest = LabelRequest(prompt_id="budget", text="", need_genre=True, need_set=True,
                              need_essay=self.template.asks_essay)
        self.needed_tokens = answer_max_tokens(label_schema(widest, self.template.asks_essay),
                                               spec.family)
        if max_tokens is not None and max_tokens < self.needed_tokens:
            raise ValueError(f"labeller max_tokens {max_tokens} is below the "
                             f"{self.needed_tokens} the longest answer of {model} may need")
        self.params: dict[str, Any] = {"temperature": temperature,
                                       "max_tokens": max_tokens or self.needed_tokens}
        self.batches = 0  # gateway batches sent, for tests and logs
        self._queue: list[_Queued] = []
        self._sender: asyncio.Task[None] | None = None

    def ask(self, request: LabelRequest) -> LabelRequest:
        """``request`` as this labeller's template can ask it: a template before v3 cannot
        ask whether the prompt is an essay (its answers carry no essay answer)."""
        if request.need_essay and not self.template.asks_essay:
            return request.model_copy(update={"need_essay": False})
        return request

    def chat_request(self, request: LabelRequest) -> ChatRequest:
        request = self.ask(request)
        rendered = render_label_prompt(self.template, request)
        return ChatRequest(
            model=self.model,
            messages=(Message(role="system", content=rendered.system),
                      Message(role="user", content=rendered.user)),
            params=self.params,
            response_schema=label_schema(request, self.template.asks_essay),
            stage=STAGE,
            tag=request.prompt_id,
        )

    async def label(self, request: LabelRequest) -> LabelResult:
        (result,) = await self.label_many([request])
        return result

    async def label_many(self, requests: Sequence[LabelRequest]) -> list[LabelResult]:
        """Results in request order; the requests join the next gateway batch."""
        loop = asyncio.get_running_loop()
        queued = [_Queued(self.ask(r), self.chat_request(r), loop.create_future())
                  for r in requests]
        if self._sender is None or self._sender.done():
            # A sender left by an earlier event loop is gone, and so are its waiters.
            self._queue = [q for q in self._queue if q.future.get_loop() is loop]
            self._sender = loop.create_task(self._send_batches())
        self._queue.extend(queued)
        return list(await asyncio.gather(*(q.future for q in queued)))

    async def _send_batches(self) -> None:
        while self._queue:
            await asyncio.sleep(0)  # let the callers started with this one join the batch
            batch = [q for q in self._queue if not q.future.done()]  # done: caller cancelled
            self._queue = []
            if not batch:
                continue
            self.batches += 1
            try:
                results = await self.gateway.run([q.chat for q in batch])
            except asyncio.CancelledError:
                for q in batch:
                    q.future.cancel()
                raise
            except Exception as exc:  # e.g. a missing API key: every waiter hears of it
                for q in batch:
                    if not q.future.done():
                        q.future.set_exception(exc)
                continue
            for q, result in zip(batch, results, strict=True):
                if not q.future.done():
                    q.future.set_result(to_label_result(result, q.request))
