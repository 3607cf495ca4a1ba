"""The judge's messages for many essays: the rubric part rendered once per genre.

``render_judge_messages`` lays out every trait and sub-question (``string.Template``)
for each essay: ~0.3 ms, at 10k essays twice (judge-while-generating, then the judge
stage). Here each genre is rendered once with sentinels where the prompt and the essay
go, and essays are spliced into that frame. The output is the renderer's own: a frame
is used only if splicing a probe pair (whitespace, ``$``, braces) reproduces the direct
rendering exactly, and a value at either end of a message (where ``strip`` could touch
it) falls back to rendering directly.
"""

from __future__ import annotations

from typing import Any

from essaybench.bench.rubrics import (
    AlignScore,
    Rubric,
    render_align_messages,
    render_judge_messages,
)

_SLOTS = ("\ue000prompt\ue001", "\ue000essay\ue001")  # private-use: never in a rubric
_PROBE = ("  探针 $x ${y} {z}\n", "\n 文$$ {} \t")
Frame = list[tuple[str, list[str | int]]]  # (role, literal text or slot index)


def _direct(rubric: Rubric | AlignScore, genre: str, prompt_text: str,
            essay_text: str) -> list[dict[str, str]]:
    if isinstance(rubric, AlignScore):
        return render_align_messages(rubric, prompt_text, essay_text)
    return render_judge_messages(rubric, genre, prompt_text, essay_text)


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


def _fill(frame: Frame, values: tuple[str, str]) -> list[dict[str, str]]:
    return [{"role": role, "content": "".join(p if isinstance(p, str) else values[p]
                                              for p in parts)}
            for role, parts in frame]


class JudgeRenderer:
    """Messages and answer schema of a judge call, per genre, for one rubric."""

    def __init__(self, rubric: Rubric | AlignScore, analysis_max_chars: int) -> None:
        self.rubric = rubric
        self.analysis_max_chars = analysis_max_chars
        self._frames: dict[str, Frame | None] = {}
        self._schemas: dict[str, dict[str, Any]] = {}

    def _frame(self, genre: str) -> Frame | None:
        if genre not in self._frames:
            rendered = _direct(self.rubric, genre, *_SLOTS)
            frame: Frame | None = [(m["role"], _split(m["content"])) for m in rendered]
            assert frame is not None
            at_edge = any(parts and (isinstance(parts[0], int) or isinstance(parts[-1], int))
                          for _, parts in frame)
            if at_edge or _fill(frame, _PROBE) != _direct(self.rubric, genre, *_PROBE):
                frame = None
            self._frames[genre] = frame
        return self._frames[genre]

    def messages(self, genre: str, prompt_text: Any, essay_text: Any) -> list[dict[str, str]]:
        frame = self._frame(genre)
        if frame is None:
            return _direct(self.rubric, genre, prompt_text, essay_text)
        # Template.substitute inserts str(value): the same for None as the direct path.
        return _fill(frame, (str(prompt_text), str(essay_text)))

    def schema(self, genre: str) -> dict[str, Any]:
        if genre not in self._schemas:
            self._schemas[genre] = (
                self.rubric.answer_schema(self.analysis_max_chars)
                if isinstance(self.rubric, AlignScore)
                else self.rubric.answer_schema(genre, self.analysis_max_chars))
        return self._schemas[genre]
