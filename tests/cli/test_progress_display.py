"""The CLI's progress display: the live table a terminal gets (log records above it),
the lines a pipe gets on a clock, the waiting message by kind of endpoint, and the
observer it installs only for the duration of a command."""

from __future__ import annotations

import io
import logging
import re
import time
from pathlib import Path

import pytest
import yaml
from prefect.logging.handlers import PrefectConsoleHandler
from rich.console import Console

from essaybench.bench.config import load_benchmark_config
from essaybench.cli.common import console
from essaybench.cli.progress import LiveBoard, calls_label, endpoints_note, progress_display
from essaybench.core.activity import doing
from essaybench.core.errors import UserError
from essaybench.llm.progress import INTERVAL_ENV, TextReporter, current_progress, set_progress
from essaybench.llm.registry import ModelSpec
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
    # every call done while aggregation runs: the display says so, and what runs
    board.finished(_request(3, "writer", "generate"),
                   ChatResult(key="3", model="writer", status=CallStatus.OK))
    board.finished(_request(9, "judge", "judge"),
                   ChatResult(key="9", model="judge", status=CallStatus.OK))
    with doing("aggregate"):
        later = Console(width=100, record=True, color_system=None)
        later.print(board)
    shown = later.export_text()
    assert re.search(r"^stage aggregate running \d+s$", shown, re.M), shown
    assert "calls done" in shown and "ETA" not in shown


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


def _screen(output: str) -> list[str]:
    """What a terminal shows after ``output``: the few controls rich's live display
    writes (cursor up, erase line, carriage return) applied, colours dropped."""
    rows: list[list[str]] = [[]]
    row = col = 0
    for token in re.findall(r"\x1b\[[0-9;?]*[A-Za-z]|\r|\n|[^\x1b\r\n]", output):
        if token == "\n":
            row, col = row + 1, 0
            if row == len(rows):
                rows.append([])
        elif token == "\r":
            col = 0
        elif token.startswith("\x1b["):
            if token.endswith("A"):
                row = max(0, row - int(token[2:-1] or 1))
            elif token == "\x1b[2K":
                rows[row] = []
        else:
            line = rows[row]
            line.extend(" " * (col - len(line)))
            line[col:col + 1] = [token]
            col += 1
    return ["".join(r).rstrip() for r in rows]


def test_live_prefect_logs_go_above_the_display_and_leave_no_old_frame(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Prefect's console handler prints with a console of its own onto the terminal it
    was set up with: without the display's help its lines were glued into the table,
    and each redraw left an old frame behind."""
    screen = io.StringIO()
    monkeypatch.setattr(console, "_file", screen)
    monkeypatch.setattr(console, "_force_terminal", True)
    monkeypatch.setattr(console, "is_interactive", True)
    monkeypatch.setattr(console, "_width", 80)
    handler = PrefectConsoleHandler(stream=screen)  # as Prefect's logging.yml sets it up
    logger = logging.getLogger("prefect.flow_runs.test_progress_display")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    monkeypatch.setattr(logger, "propagate", False)
    plain = logging.StreamHandler(screen)  # e.g. prefect._internal's: the same way round
    internal = logging.getLogger("prefect._internal.test_progress_display")
    internal.addHandler(plain)
    monkeypatch.setattr(internal, "propagate", False)
    before = set_progress(None)
    try:
        with progress_display("generating…"):
            board = current_progress()
            requests = [_request(i, "writer", "generate") for i in range(3)]
            for request in requests:
                board.planned(request)
            logger.info("Beginning flow run 'brisk-fox' for flow 'pipeline'")
            board.finished(requests[0], ChatResult(key="0", model="writer",
                                                   status=CallStatus.OK))
            logger.warning("Finished in state Completed()")
            internal.error("an internal error")
    finally:
        logger.removeHandler(handler)
        internal.removeHandler(plain)
        set_progress(before)
    assert handler.console.file is screen and plain.stream is screen  # put back
    shown = _screen(screen.getvalue())
    frames = [i for i, line in enumerate(shown) if "generating…" in line]
    assert len(frames) == 1, shown  # the last frame only
    first, second, third = (shown.index("Beginning flow run 'brisk-fox' for flow 'pipeline'"),
                            shown.index("Finished in state Completed()"),
                            shown.index("an internal error"))
    assert first < second < third < frames[0], shown  # whole lines, above the display
    assert any(re.search(r"generate\s+writer\s+.*1/3", line) for line in shown), shown


def test_piped_a_line_comes_every_interval_naming_the_stage(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No call ends while a stage like aggregate runs: the clock makes the lines."""
    out = io.StringIO()
    monkeypatch.setattr(console, "_file", out)
    monkeypatch.setattr(console, "_width", 80)
    monkeypatch.setenv(INTERVAL_ENV, "0.05")
    before = set_progress(None)
    try:
        with progress_display("aggregating…"), doing("aggregate"):
            deadline = time.monotonic() + 10
            while "stage aggregate running" not in out.getvalue() \
                    and time.monotonic() < deadline:
                time.sleep(0.01)
    finally:
        set_progress(before)
    lines = out.getvalue().splitlines()
    assert lines[0] == "aggregating… (progress every 0.05 s)"
    assert lines[1] == "progress: stage aggregate started"
    assert re.fullmatch(r"progress: stage aggregate running \d+s", lines[2]), lines


def test_a_bad_interval_is_one_line_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(INTERVAL_ENV, "soon")
    with pytest.raises(UserError, match=f"{INTERVAL_ENV}='soon'"), progress_display("x"):
        pass


def _spec(name: str, base_url: str, **more: str) -> ModelSpec:
    return ModelSpec(name=name, provider=more.pop("provider", "deepseek"), base_url=base_url,
                     model_id=name, family="f", **more)  # type: ignore[arg-type]


def test_the_waiting_message_follows_the_kind_of_endpoint() -> None:
    embedded = _spec("smol", "embedded")
    remote = _spec("ds", "https://api.deepseek.com/v1")
    batch = _spec("gpt", "https://api.openai.com/v1", provider="openai", batch="openai")
    assert endpoints_note([embedded]) == "the embedded model is slow: minutes"
    assert endpoints_note([remote, remote]) == "calls to api.deepseek.com"
    assert endpoints_note([embedded, remote, batch]) == (
        "the embedded model is slow: minutes; openai through provider batches: up to 24 h; "
        "calls to api.deepseek.com")
    many = [_spec(f"m{i}", f"https://h{i}.example.com/v1") for i in range(5)]
    assert endpoints_note(many).endswith("h2.example.com and 2 more")


def test_a_run_on_remote_endpoints_is_not_told_the_embedded_model_is_slow(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registry, config = tmp_path / "models.yaml", tmp_path / "benchmark.yaml"
    config.write_text(yaml.safe_dump({"generate": {"models": ["writer"]},
                                      "judge": {"judges": ["judge"]}, "drift": None}),
                      encoding="utf-8")
    common = {"provider": "deepseek", "family": "deepseek", "model_id": "deepseek-chat"}
    registry.write_text(yaml.safe_dump({"models": {
        "writer": {**common, "base_url": "https://api.deepseek.com/v1"},
        "judge": {**common, "base_url": "http://127.0.0.1:8000/v1"}}}), encoding="utf-8")
    monkeypatch.setenv("ESSAYBENCH_MODELS", str(registry))
    assert load_benchmark_config(config).models() == ["writer", "judge"]
    assert calls_label("generating and judging", config) == (
        "generating and judging (calls to 127.0.0.1:8000, api.deepseek.com)…")
    assert calls_label("judging the anchor set", config, judges=True) == (
        "judging the anchor set (calls to 127.0.0.1:8000)…")
    assert calls_label("judging", tmp_path / "missing.yaml") == "judging…"
