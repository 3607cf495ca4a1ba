"""The per-genre judge frame renders exactly what the rubric's renderer renders."""

from __future__ import annotations

import pytest

from essaybench.bench.judge.render import JudgeRenderer
from essaybench.bench.rubrics import (
    load_align_score,
    load_rubric,
    render_align_messages,
    render_judge_messages,
)

TEXTS = [("写一篇记叙文。", "那年夏天……"), ("  前后有空白 \n", "\n\t正文 $x ${y} {z} $$ \n"),
         ("\ue000prompt\ue001", "\ue000essay\ue001 含哨兵"), ("", ""), ("题", None)]


@pytest.mark.parametrize(("prompt", "essay"), TEXTS)
def test_rubric_frame_equals_direct_rendering(prompt: str, essay: str | None) -> None:
    rubric = load_rubric()
    renderer = JudgeRenderer(rubric, 4000)
    for genre in rubric.genres:
        assert renderer.messages(genre, prompt, essay) == \
            render_judge_messages(rubric, genre, prompt, essay)  # type: ignore[arg-type]
        assert renderer.schema(genre) == rubric.answer_schema(genre, 4000)


@pytest.mark.parametrize(("prompt", "essay"), TEXTS)
def test_align_frame_equals_direct_rendering(prompt: str, essay: str | None) -> None:
    align = load_align_score()
    renderer = JudgeRenderer(align, 300)
    assert renderer.messages("narrative", prompt, essay) == \
        render_align_messages(align, prompt, essay)  # type: ignore[arg-type]
    assert renderer.schema("narrative") == align.answer_schema(300)


def test_unknown_genre_fails_as_the_renderer_does() -> None:
    with pytest.raises(KeyError):
        JudgeRenderer(load_rubric(), 4000).messages("poem", "p", "e")
