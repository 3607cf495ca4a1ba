"""Batch mode inside ``Gateway.run`` (``llm.batch.route``), as every stage reaches it through
``open_gateway``: entries with ``batch`` go through their provider's batch API, the others
direct, in one run; a run that does not wait raises ``BatchesPending`` once its direct calls
are recorded, and entering the run again collects the same batch (nothing submitted twice)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from essaybench.core.errors import UserError
from essaybench.llm.batch import BatchOptions
from essaybench.llm.batch.route import BatchesPending
from essaybench.llm.fake.server import FakeServerHandle
from essaybench.llm.part_ledger import PartLedger
from essaybench.llm.progress import TextReporter, set_progress
from essaybench.llm.scope import ReuseScope
from essaybench.llm.session import open_gateway
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult
from essaybench.store.parts import PartStore
from tests.llm.batch.conftest import FAST, requests
from tests.llm.conftest import fake_spec, registry_of

RUN = ReuseScope.of_run("run-1")


def _open(*args: Any, **kwargs: Any) -> Any:
    """open_gateway with quick polls (BatchOptions, as the benchmark config's batch:)."""
    return open_gateway(*args, batch_options=FAST, **kwargs)


def _registry(fake: FakeServerHandle, protocol: str = "openai") -> Any:
    return registry_of(
        fake_spec("w", model_id="w", batch=protocol, batch_price_factor=0.5,
                  base_url=fake.base_url),
        fake_spec("d", model_id="d", base_url=fake.base_url))


def _mixed() -> list[ChatRequest]:
    return [*requests(4, model="w"), *requests(3, model="d", prefix="直接")]


def _rows(path: Path) -> dict[str, tuple[str, bool | None, float]]:
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.execute("SELECT key, model, batched, cost_usd FROM llm_calls").fetchall()
    return {k: (m, b, c) for k, m, b, c in rows}


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_run_mixes_batch_and_direct_entries(serve: Any, tmp_path: Path,
                                              protocol: str) -> None:
    fake = serve({"delay_s": 1.5})  # longer than the first poll: the run really waits
    lines: list[str] = []
    before = set_progress(TextReporter(emit=lines.append))
    try:
        with _open(_registry(fake, protocol), tmp_path, ["w", "d"],
                          scope=RUN) as session:
            got = session.run(_mixed())
    finally:
        set_progress(before)
    assert all(r.status is CallStatus.OK for r in got)
    stats = fake.stats()
    assert stats.batch is not None and stats.batch.batches_created == 1
    assert stats.batch.received_per_key == {"1": 4}  # w's four calls, in one batch
    assert stats.per_model["d"].received == 3 and "w" not in stats.per_model
    rows = _rows(tmp_path / "ledger.duckdb")
    assert {k: (m, b) for k, (m, b, _) in rows.items()} == {
        **{r.key: ("w", True) for r in got[:4]}, **{r.key: ("d", None) for r in got[4:]}}
    for r in got[:4]:  # half the list price (1 $/M in, 2 $/M out)
        assert r.batched and r.usage.input_tokens and r.usage.output_tokens
        assert rows[r.key][2] == pytest.approx(
            (r.usage.input_tokens + 2 * r.usage.output_tokens) / 1e6 * 0.5)
    waits = [line for line in lines if line.startswith("batch mode:")]
    assert waits and "4 calls waiting in batch " in waits[0] and "(w: " in waits[0]
    assert "next poll in" in waits[0]


def test_a_run_that_does_not_wait_is_entered_again_and_collects_the_same_batch(
        serve: Any, tmp_path: Path) -> None:
    fake = serve({"delay_s": 2.0})  # still open when the direct calls are done
    registry = _registry(fake)
    with _open(registry, tmp_path, ["w", "d"], scope=RUN,
                      batch_waiting="return") as session, \
            pytest.raises(BatchesPending, match=r"4 calls waiting in batch batch_\w+ \(w: "):
        session.run(_mixed())
    # The direct calls were done and recorded before the run gave the process up.
    assert [m for m, _, _ in _rows(tmp_path / "ledger.duckdb").values()] == ["d"] * 3
    assert fake.stats().per_model["d"].received == 3
    results: list[ChatResult] = []
    for _ in range(100):  # each entry polls once, as a resumed flow run does
        with _open(registry, tmp_path, ["w", "d"], scope=RUN,
                          batch_waiting="return") as session:
            try:
                results = session.run(_mixed())
                break
            except BatchesPending:
                pass
        time.sleep(0.05)
    assert [r.status for r in results] == [CallStatus.OK] * 7
    stats = fake.stats()
    assert stats.batch is not None and stats.batch.batches_created == 1
    assert stats.batch.batches_per_custom_id == {"1": 4}
    assert stats.per_model["d"].received == 3  # served from the ledger on re-entry


def test_calls_a_batch_of_the_run_answered_are_never_submitted_again(
        serve: Any, tmp_path: Path) -> None:
    fake = serve({"fail": {"rate": 1.0, "status": 400}})  # every line refused for good
    registry = _registry(fake)
    for _ in range(2):  # the run entered again (e.g. a resumed flow run)
        with _open(registry, tmp_path, ["w"], scope=RUN) as session:
            got = session.run(requests(3, model="w"))
        assert [r.status for r in got] == [CallStatus.API_ERROR] * 3
    stats = fake.stats()
    assert stats.batch is not None and stats.batch.batches_created == 1
    # A new run is a new measurement: it submits them again.
    with _open(registry, tmp_path, ["w"], scope=ReuseScope.of_run("run-2")) as session:
        session.run(requests(3, model="w"))
    assert fake.stats().batch.batches_created == 2


def test_follow_ups_of_a_batched_entry_wait_for_its_batch(serve: Any, tmp_path: Path) -> None:
    """A direct writer's follow-ups (the judge prefetch) for a batched judge are not sent
    direct: the judge's own batch asks for them later."""
    fake = serve()

    def judge_it(request: ChatRequest, result: ChatResult) -> list[ChatRequest]:
        return requests(1, model="w", prefix=f"评{request.tag}")

    with _open(_registry(fake), tmp_path, ["w", "d"], scope=RUN) as session:
        assert session.gateway.batches is not None  # installed by open_gateway
        got = session.run(requests(2, model="d"), follow_up=judge_it)
    assert len(got) == 2
    stats = fake.stats()
    assert stats.per_model["d"].received == 2 and "w" not in stats.per_model
    assert stats.batch is None or stats.batch.batches_created == 0


def test_a_sharded_run_refuses_batch_entries(serve: Any, tmp_path: Path) -> None:
    fake = serve()
    shard = PartLedger(PartStore(tmp_path / "parts"), "ledger/shard=0")
    with pytest.raises(UserError, match="batch mode is not supported in a sharded run"), \
            _open(_registry(fake), tmp_path, ["w", "d"], ledger=shard):
        pass


def test_llm_usage_counts_batched_calls_at_their_price(serve: Any, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from essaybench.cli import app

    fake = serve()
    with _open(_registry(fake), tmp_path, ["w", "d"], scope=RUN) as session:
        got = session.run(_mixed())
    out = CliRunner().invoke(app, ["llm", "usage", "--store", str(tmp_path), "--markdown"],
                             env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")]
            for line in out.output.splitlines() if line.startswith("| w ")
            or line.startswith("| d ")}
    header = [c.strip() for c in next(line for line in out.output.splitlines()
                                      if line.startswith("| model")).strip("|").split("|")]
    cost = {m: dict(zip(header, cells, strict=True))["cost USD"] for m, cells in rows.items()}
    half = sum((r.usage.input_tokens or 0) + 2 * (r.usage.output_tokens or 0)
               for r in got[:4]) / 1e6 * 0.5
    assert cost["w"].endswith("(4 batched)") and float(cost["w"].split()[0]) == pytest.approx(
        half, rel=1e-3)
    assert "batched" not in cost["d"]


def test_on_expired_from_the_options_sends_expired_lines_direct(
        serve: Any, tmp_path: Path) -> None:
    fake = serve({"window_s": 0.05, "per_item_s": 0.2})  # every line expires
    options = BatchOptions(on_expired="direct", poll_initial_s=0.05, poll_max_s=0.1)
    with open_gateway(_registry(fake), tmp_path, ["w"], scope=RUN,
                      batch_options=options) as session:
        got = session.run(requests(3, model="w"))
    assert [r.status for r in got] == [CallStatus.OK] * 3
    stats = fake.stats()
    assert stats.batch is not None and stats.batch.batches_created == 1
    assert stats.per_model["w"].received == 3  # re-sent direct, not in a second batch
    assert [b for _, b, _ in _rows(tmp_path / "ledger.duckdb").values()] == [None] * 3
