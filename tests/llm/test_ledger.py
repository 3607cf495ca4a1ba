"""The ledger's close leaves the checkpoint to DuckDB's WAL threshold; nothing is lost."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from essaybench.core.hashing import canonical_json
from essaybench.llm.ledger import Ledger, ledger_row
from essaybench.llm.types import CallStatus, ChatResult


def _row(i: int) -> dict[str, object]:
    now = datetime.now(UTC)
    result = ChatResult(key=f"k{i}", model="m", status=CallStatus.OK, text=f"答{i}",
                        attempts=1, started_at=now, finished_at=now, stage="judge", tag=str(i))
    return ledger_row(result, endpoint="http://x/v1", model_id="gpt-x",
                      request=canonical_json({"messages": [{"role": "user",
                                                            "content": "题" * 500}]}))


def test_rows_survive_a_close_without_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "ledger.duckdb"
    with Ledger(path) as ledger:
        ledger.write_rows([_row(i) for i in range(50)])
    assert path.with_suffix(".duckdb.wal").is_file()  # left for the next open to replay
    with Ledger(path) as ledger:
        found = ledger.lookup_ok([f"k{i}" for i in range(60)])
        ledger.write_rows([_row(50)])
    assert sorted(found) == sorted(f"k{i}" for i in range(50))
    assert found["k7"].text == "答7" and found["k7"].from_ledger
    with Ledger(path) as ledger:
        assert len(ledger.lookup_ok(["k50"])) == 1


def test_request_and_reply_texts_are_stored_zstd_compressed(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.duckdb") as ledger:
        ledger.write_rows([_row(i) for i in range(50)])
        ledger.con.execute("CHECKPOINT")
        rows = ledger.query("select column_name, compression from "
                            "pragma_storage_info('llm_calls') where segment_type <> 'VALIDITY'")
        found = ledger.lookup_ok(["k3"])
    by_column: dict[str, set[str]] = {}
    for row in rows:
        by_column.setdefault(str(row["column_name"]), set()).add(str(row["compression"]))
    for column in ("request", "response_text", "parsed"):
        assert by_column[column] == {"ZSTD"}, (column, by_column[column])
    assert by_column["key"] != {"ZSTD"}  # the short columns keep DuckDB's own choice
    assert found["k3"].text == "答3"


class _FailingOnce(Ledger):
    """A ledger whose first commit fails (as a superseded shard attempt's or a full
    disk's would)."""

    failed = False

    def write_rows(self, rows: Sequence[dict[str, Any]]) -> None:
        if not self.failed:
            self.failed = True
            raise OSError("disk full")
        super().write_rows(rows)


def test_a_failed_commit_reaches_its_callers_and_nothing_else(tmp_path: Path) -> None:
    """The rows of a failed commit raise in their own callers' ``record``; a row recorded
    later gets its own attempt; the commit task ends without an exception nobody
    retrieves (asyncio logs those when the task is collected)."""
    unretrieved: list[dict[str, Any]] = []

    async def main() -> tuple[list[BaseException | None], list[str]]:
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: unretrieved.append(ctx))
        with _FailingOnce(tmp_path / "l.duckdb", linger_s=0.05) as ledger:
            first = await asyncio.gather(*(ledger.record(_row(i)) for i in range(3)),
                                         return_exceptions=True)
            await ledger.record(_row(3))
            flusher, ledger._flusher = ledger._flusher, None
            assert flusher is not None and flusher.done() and flusher.exception() is None
            del flusher
            gc.collect()
            return list(first), sorted(ledger.lookup_ok([f"k{i}" for i in range(4)]))

    errors, stored = asyncio.run(main())
    assert [type(e) for e in errors] == [OSError] * 3
    assert stored == ["k3"]
    assert unretrieved == []
