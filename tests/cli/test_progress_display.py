"""The CLI's progress display: the live table a terminal gets, and the observer it
installs only for the duration of a command."""

from __future__ import annotations

from rich.console import Console

from essaybench.cli.progress import LiveBoard, progress_display
from essaybench.llm.progress import TextReporter, current_progress, set_progress
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message, Usage


def _request(i: int, model: str, stage: str) -> ChatRequest:
    return ChatRequest(model=model, stage=stage, messages=(Message(role="user", content=str(i)),))


def test_the_live_board_shows_each_stage_and_model() -> None:
    board = LiveBoard("generating…")
    console = Console(width=100, record=True, color_system=None)
    console.print(board)
    assert "generating…" in console.export_text()  # nothing planned yet: the spinner
    for i in range(4):
        board.planned(_request(i, "writer", "generate"))
    board.planned(_request(9, "judge", "judge"))
    for i, status in enumerate([CallStatus.OK, CallStatus.OK, CallStatus.API_ERROR]):
        board.finished(_request(i, "writer", "generate"),
                       ChatResult(key=str(i), model="writer", status=status,
                                  usage=Usage(input_tokens=600, output_tokens=400)))
    console.print(board)
    text = console.export_text()
    [writer] = [line for line in text.splitlines() if "writer" in line]
    assert writer.split()[0] == "generate"
    assert writer.split()[-4:] == ["3/4", "2", "1", "3,000"]
    [judge] = [line for line in text.splitlines() if line.startswith("judge ")]
    assert judge.split()[-4:] == ["0/1", "0", "0", "0"]
    assert "elapsed " in text and "ETA " in text


def test_piped_the_command_gets_a_text_reporter_then_the_default_again() -> None:
    before = set_progress(None)
    try:
        default = current_progress()
        with progress_display("working…", interval_s=2):
            inside = current_progress()
            assert isinstance(inside, TextReporter) and inside is not default
            assert inside.interval_s == 2
        assert current_progress() is default
    finally:
        set_progress(before)
