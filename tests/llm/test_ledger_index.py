"""The ledger's in-memory index of each run's keys: a run-scoped look-up for keys none of
its runs has is answered without a query, and the index never hides a row: rows written
after it was read (this process), rows of an old ledger without run ids, and rows another
process wrote while the ledger was closed are all found. Checked against a plain query."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from essaybench.core.hashing import canonical_json
from essaybench.llm.ledger import Ledger, ledger_row
from essaybench.llm.scope import ANY_RUN, ReuseScope
from essaybench.llm.types import CallStatus, ChatResult


def _row(key: str, run_id: str | None, ok: bool = True) -> dict[str, object]:
    now = datetime.now(UTC)
    result = ChatResult(key=key, model="m", status=CallStatus.OK if ok else CallStatus.API_ERROR,
                        text="答", attempts=1, started_at=now, finished_at=now, stage="judge",
                        tag=key)
    return ledger_row(result, endpoint="http://x/v1", model_id="m", run_id=run_id,
                      request=canonical_json({"messages": [{"role": "user", "content": key}]}))


def test_a_fresh_runs_look_ups_need_no_query_and_find_what_it_writes(tmp_path: Path) -> None:
    path = tmp_path / "ledger.duckdb"
    mine, other = ReuseScope.of_run("r2"), ReuseScope.of_run("r1")
    with Ledger(path) as ledger:
        ledger.write_rows([_row("a", "r1"), _row("b", "r1")])
        assert ledger.lookup_ok(["a", "b"], scope=mine) == {}  # r1's calls: not r2's
        assert ledger.queries_saved == 1
        assert set(ledger.lookup_ok(["a", "b", "z"], scope=other)) == {"a", "b"}
        ledger.write_rows([_row("a", "r2"), _row("c", "r2", ok=False)])  # after the index
        assert set(ledger.lookup_ok(["a", "b", "c"], scope=mine)) == {"a"}  # c failed
        since = datetime(2000, 1, 1, tzinfo=UTC)
        assert set(ledger.lookup_ok(["c"], since, scope=mine)) == {"c"}
        assert set(ledger.lookup_ok(["a", "b", "c"], scope=ANY_RUN)) == {"a", "b"}
        saved = ledger.queries_saved
        assert ledger.lookup_ok(["b", "z"], scope=mine) == {}
        assert ledger.queries_saved == saved + 1


def test_rows_written_while_closed_and_rows_without_a_run_are_found(tmp_path: Path) -> None:
    path = tmp_path / "ledger.duckdb"
    first = Ledger(path).open()
    first.write_rows([_row("a", None)])
    assert first.lookup_ok(["b"], scope=ReuseScope.of_run("r1")) == {}  # index of r1 read
    first.close()
    with Ledger(path) as second:  # as another process would, in between
        second.write_rows([_row("b", "r1")])
    first.open()
    try:
        assert set(first.lookup_ok(["a", "b"], scope=ReuseScope.of_run("r1"))) == {"b"}
        old = ReuseScope.of_run("r1", unattributed=True)
        assert set(first.lookup_ok(["a", "b"], scope=old)) == {"a", "b"}
    finally:
        first.close()
