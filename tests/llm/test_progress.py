"""Progress of gateway batches: the text reporter's line and its throttling, fed by a
real gateway run on the fake server."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from essaybench.core import activity
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.gateway import Gateway
from essaybench.llm.ledger import Ledger
from essaybench.llm.progress import (
    ProgressBoard,
    TextReporter,
    current_progress,
    duration,
    set_progress,
    ticking,
)
from essaybench.llm.retry import Backoff
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message, Usage
from tests.llm.conftest import fake_spec, registry_of


def _requests(n: int, model: str, stage: str) -> list[ChatRequest]:
    return [ChatRequest(model=model, stage=stage, tag=f"p{i}",
                        messages=(Message(role="user", content=f"{stage} 第{i}题：写一篇短文"),))
            for i in range(n)]


class ManualClock:
    """A clock the test sets: deterministic throttling and ETA."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_reporter_line_from_a_real_batch(tmp_path: Path) -> None:
    lines: list[str] = []
    reporter = TextReporter(interval_s=3600, emit=lines.append)
    registry = registry_of(fake_spec("writer"), fake_spec("judge"))
    requests = [*_requests(6, "writer", "generate"), *_requests(3, "judge", "judge")]

    async def main() -> list[ChatResult]:
        with Ledger(tmp_path / "ledger.duckdb") as ledger:
            gateway = Gateway(registry, ledger, backoff=Backoff(base_s=0.01, cap_s=0.05),
                              observer=reporter,
                              base_urls={"writer": server.base_url, "judge": server.base_url})
            return await gateway.run(requests)

    with run_fake_server() as server:
        results = asyncio.run(main())
    assert all(r.ok for r in results)
    tokens = {m: sum((r.usage.input_tokens or 0) + (r.usage.output_tokens or 0)
                     for r in results if r.model == m) for m in ("writer", "judge")}
    assert all(tokens.values())
    # Only the end-of-batch line: the interval never passed.
    assert len(lines) == 1
    line = lines[0]
    assert f"generate writer 6/6 (ok 6, failed 0, {tokens['writer']:,} tokens)" in line
    assert f"judge judge 3/3 (ok 3, failed 0, {tokens['judge']:,} tokens)" in line
    assert re.search(r"elapsed \d+s, ETA 0s$", line)
    # The batch's count is done with; the next batch starts afresh.
    assert reporter.tallies == {}


def test_reporter_throttles_to_its_interval() -> None:
    lines: list[str] = []
    clock = ManualClock()
    reporter = TextReporter(interval_s=5, emit=lines.append, clock=clock)
    requests = _requests(20, "m", "judge")
    for request in requests:
        reporter.planned(request)  # the clock starts at 0
    for i, request in enumerate(requests):
        clock.now = i + 1.0  # one call finishes every second
        status = CallStatus.OK if i % 4 else CallStatus.API_ERROR
        reporter.finished(request, ChatResult(key=str(i), model="m", status=status,
                                              usage=Usage(input_tokens=10, output_tokens=5)))
    # The first finish (t=1) arms the timer; then a line at t=6, 11, 16: every 5 s, not
    # every call.
    assert len(lines) == 3
    assert lines[0] == ("progress: judge m 6/20 (ok 4, failed 2, 90 tokens); "
                        "elapsed 6s, ETA 14s")
    assert lines[1].startswith("progress: judge m 11/20 ")
    reporter.batch_ended()
    assert lines[-1] == ("progress: judge m 20/20 (ok 15, failed 5, 300 tokens); "
                         "elapsed 20s, ETA 0s")


def test_eta_is_the_pace_so_far() -> None:
    clock = ManualClock()
    reporter = TextReporter(emit=lambda _: None, clock=clock)
    requests = _requests(4, "m", "generate")
    for request in requests:
        reporter.planned(request)
    assert reporter.line().endswith("ETA ?")
    clock.now = 10.0
    reporter.finished(requests[0], ChatResult(key="0", model="m", status=CallStatus.OK))
    assert reporter.eta() == 30.0  # 1 call in 10 s, 3 left
    assert reporter.line().endswith("elapsed 10s, ETA 30s")
    assert duration(75) == "1m15s" and duration(3725) == "1h02m"


def test_the_default_observer_is_a_text_reporter() -> None:
    before = set_progress(None)
    try:
        default = current_progress()
        assert isinstance(default, TextReporter) and default.tick_while_busy
    finally:
        set_progress(before)


def _one_slow_call(tmp_path: Path, reporter: TextReporter) -> None:
    """One generate call that takes 0.8 s on the fake server, observed by ``reporter``."""
    slow = FakeScenario.model_validate({"models": {"gpt-x": {"latency_ms": {"mean": 800}}}})

    async def main() -> list[ChatResult]:
        with Ledger(tmp_path / "ledger.duckdb") as ledger:
            gateway = Gateway(registry_of(fake_spec("writer")), ledger, observer=reporter,
                              base_urls={"writer": server.base_url})
            return await gateway.run(_requests(1, "writer", "generate"))

    with run_fake_server(slow) as server:
        assert all(r.ok for r in asyncio.run(main()))


def test_a_worker_gets_lines_while_a_slow_call_is_out_and_no_clock_after(
        tmp_path: Path) -> None:
    """The default observer (a worker's flow run log) ticks from a batch's first call to
    its end: a line every interval during a slow call, no thread left afterwards."""
    lines: list[str] = []
    reporter = TextReporter(interval_s=0.05, emit=lines.append, tick_while_busy=True)
    _one_slow_call(tmp_path, reporter)
    assert sum(line.startswith("progress: generate writer 0/1 ") for line in lines) >= 3, lines
    assert lines[-1].startswith("progress: generate writer 1/1 ")  # the batch's end
    assert not any(t.name == "essaybench-progress" for t in threading.enumerate())


def test_a_batch_ending_beside_a_running_one_keeps_the_count() -> None:
    lines: list[str] = []
    reporter = TextReporter(emit=lines.append, clock=ManualClock())
    first, second = _requests(2, "a", "classify"), _requests(3, "b", "classify")
    reporter.batch_started()
    reporter.batch_started()
    for request in [*first, *second]:
        reporter.planned(request)
    for i, request in enumerate(first):
        reporter.finished(request, ChatResult(key=str(i), model="a", status=CallStatus.OK))
    reporter.batch_ended()  # the first batch ends; the second is still running
    assert "classify b 0/3" in lines[-1]
    assert reporter.tallies[("classify", "b")].total == 3
    for i, request in enumerate(second):
        reporter.finished(request, ChatResult(key=str(i), model="b", status=CallStatus.OK))
    reporter.batch_ended()
    assert "classify a 2/2" in lines[-1] and "classify b 3/3" in lines[-1]
    assert reporter.tallies == {}


def _ok(request: ChatRequest, i: int) -> ChatResult:
    return ChatResult(key=str(i), model=request.model, status=CallStatus.OK)


def test_the_eta_counts_the_judge_calls_of_the_essays_to_come() -> None:
    """Two judge calls per essay, sent as each essay comes back: the judge calls not asked
    for yet count (the demo's ETA was a third of the truth without them); the drift
    anchors, sent once with the first essay's, do not count for every essay."""
    clock = ManualClock()
    board = ProgressBoard(clock=clock)
    essays = _requests(10, "writer", "generate")
    for request in essays:
        board.planned(request)
    anchors = _requests(3, "judge", "drift")
    for i, essay in enumerate(essays[:4]):
        clock.now = 10.0 * (i + 1)
        board.finished(essay, _ok(essay, i))
        asked = [*(anchors if i == 0 else []),
                 *(r.model_copy(update={"tag": f"{essay.tag}-{j}"})
                   for j, r in enumerate(_requests(2, "judge", "judge")))]
        if i == 3:  # a failed essay asks for nothing
            asked = []
        board.followed(essay, asked)
        for request in asked:
            board.planned(request)
        if i == 0:  # one essay known: all there is to go by
            assert board.expected() == {("judge", "judge"): 18, ("drift", "judge"): 27}
    for i, request in enumerate(anchors):
        board.finished(request, _ok(request, i))
    clock.now = 50.0
    # 4 essays (one failed) and the 3 anchors done, 6 essays to come: 6 x 6/4 judge calls
    # not asked for yet, the 6 asked for not done, and no more anchors
    assert board.expected() == {("judge", "judge"): 9}
    assert board.remaining() == 6 + 6 + 9
    assert board.eta() == 50.0 / 7 * 21
    assert "judge judge 0/~15 (ok 0, failed 0, 0 tokens)" in board.line()
    assert "drift judge 3/3 (ok 3, failed 0, 0 tokens)" in board.line()


def test_the_gateway_tells_which_follow_ups_each_call_asked_for(tmp_path: Path) -> None:
    registry = registry_of(fake_spec("writer"), fake_spec("judge"))
    essays = _requests(5, "writer", "generate")
    expected_then: list[int] = []

    class Recording(ProgressBoard):
        def followed(self, request: ChatRequest, asked: Sequence[ChatRequest]) -> None:
            super().followed(request, asked)
            expected_then.append(self.expected().get(("judge", "judge"), 0))

    board = Recording()

    def judge_calls(request: ChatRequest, result: ChatResult) -> list[ChatRequest]:
        return [ChatRequest(model="judge", stage="judge", tag=f"{request.tag}-{j}",
                            messages=(Message(role="user", content=f"评{result.text}{j}"),))
                for j in range(2)]

    async def main() -> list[ChatResult]:
        with Ledger(tmp_path / "ledger.duckdb") as ledger:
            gateway = Gateway(registry, ledger, backoff=Backoff(base_s=0.01, cap_s=0.05),
                              observer=board,
                              base_urls={"writer": server.base_url, "judge": server.base_url})
            return await gateway.run(essays, follow_up=judge_calls)

    with run_fake_server() as server:
        assert all(r.ok for r in asyncio.run(main()))
    assert board.asked_by == {("generate", "writer"): 5}
    assert board.asked == {("judge", "judge"): 10}
    assert board.askers == {("judge", "judge"): 5}
    assert expected_then == [8, 6, 4, 2, 0]  # two for each essay still to come
    assert board.tallies[("judge", "judge")].total == 10


def test_piped_a_slow_call_gets_lines_while_it_is_out(tmp_path: Path) -> None:
    """Ticking, a line comes every interval whatever the calls do: three while one
    call takes 0.8 s (without the clock, the first line came when the call ended)."""
    lines: list[str] = []
    reporter = TextReporter(interval_s=0.05, emit=lines.append)
    with ticking(reporter):
        _one_slow_call(tmp_path, reporter)
    assert sum(line.startswith("progress: generate writer 0/1 ") for line in lines) >= 3, lines


def test_the_clock_makes_a_line_every_interval() -> None:
    lines: list[str] = []
    clock = ManualClock()
    reporter = TextReporter(interval_s=10, emit=lines.append, clock=clock)
    assert reporter.tick() == 10 and lines == []  # armed
    clock.now = 9.0
    assert reporter.tick() == 1 and lines == []
    clock.now = 10.0
    assert reporter.tick() == 10
    assert lines == ["progress: no stage running, 10s since the start"]
    request = _requests(1, "m", "judge")[0]
    reporter.planned(request)
    clock.now = 14.0
    reporter.finished(request, _ok(request, 0))
    reporter.batch_ended()  # a line now: the next is due 10 s after it
    assert len(lines) == 2 and reporter.tick() == 10


def test_the_line_names_the_stage_that_runs() -> None:
    lines: list[str] = []
    reporter = TextReporter(interval_s=3600, emit=lines.append, clock=ManualClock())
    before = activity.set_listener(reporter.stage_started)
    try:
        with activity.doing("judge"):
            request = _requests(1, "m", "judge")[0]
            reporter.planned(request)
            reporter.finished(request, _ok(request, 0))
            # every call done while the stage still runs: no "ETA 0s" standing there
            assert re.fullmatch(r"progress: stage judge running \d+s; judge m 1/1 \(ok 1, "
                                r"failed 0, 0 tokens\); elapsed 0s, calls done",
                                reporter.line()), reporter.line()
            reporter.batch_ended()
        with activity.doing("aggregate"):
            assert re.fullmatch(r"progress: stage aggregate running \d+s", reporter.line())
    finally:
        activity.set_listener(before)
    assert lines[0] == "progress: stage judge started"
    assert lines[-1] == "progress: stage aggregate started"
    assert reporter.line() == "progress: no stage running, 0s since the start"


def test_a_failed_batch_leaves_no_count_and_no_clock_behind(tmp_path: Path) -> None:
    """A batch that fails with calls still out ends all the same: its counts are dropped
    (they would stand in every later line) and its clock stops."""
    lines: list[str] = []
    reporter = TextReporter(interval_s=0.05, emit=lines.append, tick_while_busy=True)
    slow = FakeScenario.model_validate({"models": {"gpt-x": {"latency_ms": {"mean": 300}}}})

    def broken(request: ChatRequest, result: ChatResult) -> list[ChatRequest]:
        raise RuntimeError("the follow-up broke")

    async def main() -> list[ChatResult]:
        with Ledger(tmp_path / "ledger.duckdb") as ledger:
            gateway = Gateway(registry_of(fake_spec("writer", max_concurrency=1)), ledger,
                              observer=reporter, base_urls={"writer": server.base_url})
            return await gateway.run(_requests(4, "writer", "generate"), follow_up=broken)

    with run_fake_server(slow) as server, pytest.raises(ExceptionGroup) as failed:
        asyncio.run(main())
    assert failed.group_contains(RuntimeError, match="follow-up broke")
    assert reporter.tallies == {} and reporter.open_batches == 0
    assert not any(t.name == "essaybench-progress" for t in threading.enumerate())
