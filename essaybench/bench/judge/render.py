"""The judge's messages for many essays: the rubric part rendered once per genre.

``render_judge_messages`` lays out every trait and sub-question (``string.Template``)
for each essay: ~0.3 ms, at 10k essays twice (judge-while-generating, then the judge
stage). Here each genre is rendered once with sentinels where the prompt and the essay
go, and essays are spliced into that frame. The output is the renderer's own: a frame
is used only if splicing a probe pair (whitespace, ``$``, braces) reproduces the direct
rendering exactly. A value at either end of a message (judge_prompt.v2 ends the user
message with the call's nonce) is spliced only when ``strip`` could not touch it (not
empty, no white space at its ends); other values there are rendered directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from essaybench.bench.judge.criteria import CriteriaBlock, with_criteria
from essaybench.bench.rubrics import (
    AlignScoreRubric,
    JudgePrompt,
    Rubric,
    call_tokens,
    render_align_messages,
    render_judge_messages,
    with_nonce,
)

# prompt, essay, and the call's marker and nonce (judge_prompt.v2); private-use characters
# are never in a rubric
_SLOTS = ("\ue000prompt\ue001", "\ue000essay\ue001", "\ue000marker\ue001",
          "\ue000nonce\ue001")
_PROBE = ("  探针 $x ${y} {z}\n", "\n 文$$ {} \t", "M$1", "n{0}")
Frame = list[tuple[str, list[str | int]]]  # (role, literal text or slot index)


def _direct(rubric: Rubric | AlignScoreRubric, genre: str, prompt_text: str, essay_text: str,
            marker: str, nonce: str, judge_prompt: JudgePrompt | None
            ) -> list[dict[str, str]]:
    if isinstance(rubric, AlignScoreRubric):
        return render_align_messages(rubric, prompt_text, essay_text)
    return render_judge_messages(rubric, genre, prompt_text, essay_text, judge_prompt,
                                 (marker, nonce))


def _split(content: str) -> list[str | int]:
    parts: list[str | int] = [content]
    for slot, marker in enumerate(_SLOTS):
        spliced: list[str | int] = []
        for part in parts:
            if isinstance(part, int):
                spliced.append(part)
                continue
            pieces = part.split(marker)
            for i, piece in enumerate(pieces):
                if i:
                    spliced.append(slot)
                spliced.append(piece)
        parts = spliced
    return [p for p in parts if p != ""]


def _edge_slots(frame: Frame) -> frozenset[int]:
    """The slots at the start or the end of a message, where the direct rendering's
    ``strip`` would reach into the value."""
    return frozenset(p for _, parts in frame if parts for p in (parts[0], parts[-1])
                     if isinstance(p, int))


def _unstrippable(value: str) -> bool:
    return bool(value) and not value[0].isspace() and not value[-1].isspace()


def _fill(frame: Frame, values: tuple[str, ...]) -> list[dict[str, str]]:
    return [{"role": role, "content": "".join(p if isinstance(p, str) else values[p]
                                              for p in parts)}
            for role, parts in frame]


class JudgeRenderer:
    """Messages and answer schema of a judge call, per genre, for one rubric."""

    def __init__(self, rubric: Rubric | AlignScoreRubric, analysis_max_chars: int,
                 judge_prompt: JudgePrompt | None = None,
                 criteria: Mapping[str, tuple[str, ...]] | None = None,
                 criteria_block: CriteriaBlock | None = None) -> None:
        self.rubric = rubric
        # prompt id -> acceptance criteria (judge.gold_criteria), put in that prompt's calls
        self.criteria: Mapping[str, tuple[str, ...]] = (
            criteria if criteria and criteria_block is not None else {})
        self.criteria_block = criteria_block
        self._blocks: dict[tuple[str, ...], str] = {}
        self.analysis_max_chars = analysis_max_chars
        self.judge_prompt = judge_prompt  # None: the default (judge_prompt.v1)
        self._frames: dict[str, tuple[Frame, frozenset[int]] | None] = {}
        # Read per call otherwise, each parsing the prompt's templates again.
        self._uses_nonce = (not isinstance(rubric, AlignScoreRubric) and judge_prompt is not None
                            and judge_prompt.uses_nonce)
        self._uses_call_tokens = (not isinstance(rubric, AlignScoreRubric)
                                  and judge_prompt is not None
                                  and judge_prompt.uses_call_tokens)
        self._schemas: dict[str, dict[str, Any]] = {}
        self._keys: dict[str, list[str] | None] = {}

    @property
    def uses_nonce(self) -> bool:
        return self._uses_nonce

    def reply_keys(self, genre: str) -> list[str] | None:
        """The keys of the reply's scores when they are not the question ids (short keys,
        judge_prompt.v3), in question order; None: the question ids."""
        if genre not in self._keys:
            prompt = self.judge_prompt
            self._keys[genre] = (prompt.score_keys_of(self.rubric, genre)
                                 if isinstance(self.rubric, Rubric) and prompt is not None
                                 and prompt.score_keys != "ids" else None)
        return self._keys[genre]

    def _frame(self, genre: str) -> tuple[Frame, frozenset[int]] | None:
        """The genre's frame and its slots at a message's ends; None: render directly."""
        if genre not in self._frames:
            rendered = _direct(self.rubric, genre, *_SLOTS, self.judge_prompt)
            frame: Frame = [(m["role"], _split(m["content"])) for m in rendered]
            edges = _edge_slots(frame)
            # The probe's values at the edges are unstrippable, as spliced values must be.
            assert all(_unstrippable(_PROBE[i]) for i in edges & {2, 3})
            same = (not edges & {0, 1}
                    and _fill(frame, _PROBE) == _direct(self.rubric, genre, *_PROBE,
                                                        self.judge_prompt))
            self._frames[genre] = (frame, edges) if same else None
        return self._frames[genre]

    def tokens(self, genre: str, prompt_text: Any, essay_text: Any) -> tuple[str, str]:
        """The call's (marker, nonce): see :func:`~essaybench.bench.rubrics.call_tokens`."""
        if not self._uses_call_tokens or isinstance(self.rubric, AlignScoreRubric):
            return "", ""  # v1: no per-call part (and no hashing per call)
        return call_tokens(self.rubric, genre, str(prompt_text), str(essay_text))

    def expected_nonce(self, genre: str, prompt_text: Any, essay_text: Any) -> str | None:
        """What the judge's reply must echo (None: the prompt asks for no nonce)."""
        return self.tokens(genre, prompt_text, essay_text)[1] if self.uses_nonce else None

    def messages(self, genre: str, prompt_text: Any, essay_text: Any,
                 tokens: tuple[str, str] | None = None) -> list[dict[str, str]]:
        """The call's messages; ``tokens``: its (marker, nonce) when already worked out."""
        marker, nonce = tokens or self.tokens(genre, prompt_text, essay_text)
        framed = self._frame(genre)
        # Template.substitute inserts str(value): the same for None as the direct path.
        values = (str(prompt_text), str(essay_text), marker, nonce)
        if framed is None or not all(_unstrippable(values[i]) for i in framed[1]):
            return _direct(self.rubric, genre, prompt_text, essay_text, marker, nonce,
                           self.judge_prompt)
        return _fill(framed[0], values)

    def criteria_of(self, prompt_id: Any) -> tuple[str, ...]:
        """The acceptance criteria the calls of ``prompt_id`` carry (none: ``()``)."""
        return self.criteria.get(prompt_id, ()) if self.criteria else ()

    def _block(self, criteria: tuple[str, ...]) -> str:
        if criteria not in self._blocks:
            assert self.criteria_block is not None
            self._blocks[criteria] = self.criteria_block.render(criteria)
        return self._blocks[criteria]

    def call(self, genre: str, prompt_text: Any, essay_text: Any,
             criteria: tuple[str, ...] = ()
             ) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """The messages and answer schema of one call (with the call's nonce, if any); the
        call's tokens are hashed once for both. ``criteria``: the prompt's acceptance
        criteria (``criteria_of``), appended to the system message; without any the call
        is exactly what it is without the option."""
        tokens = self.tokens(genre, prompt_text, essay_text)
        messages = self.messages(genre, prompt_text, essay_text, tokens)
        if criteria:
            messages = with_criteria(messages, self._block(criteria))
        if not self.uses_nonce:
            return messages, self.schema(genre)
        return messages, with_nonce(self.schema(genre), tokens[1])

    def schema(self, genre: str) -> dict[str, Any]:
        """The answer schema shared by every call of ``genre`` (without a nonce)."""
        if genre not in self._schemas:
            self._schemas[genre] = (
                self.rubric.answer_schema(self.analysis_max_chars)
                if isinstance(self.rubric, AlignScoreRubric)
                else self.rubric.answer_schema(genre, self.analysis_max_chars,
                                               keys=self.reply_keys(genre)))
        return self._schemas[genre]
